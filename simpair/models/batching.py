"""Dynamic padding: pad a batch only to its own longest sequence.

Shared by training and prediction so both feed the model exactly the same tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def pad_batch(
    input_ids: Sequence[Sequence[int]],
    pad_id: int,
    token_type_ids: Sequence[Sequence[int]] | None = None,
) -> dict[str, torch.Tensor]:
    """Right-pad to the batch maximum; returns input_ids, attention_mask and (if given) token_type_ids."""
    n = len(input_ids)
    width = max((len(x) for x in input_ids), default=1)
    ids = np.full((n, width), pad_id, dtype=np.int64)
    mask = np.zeros((n, width), dtype=np.int64)
    types = np.zeros((n, width), dtype=np.int64) if token_type_ids is not None else None
    for i, seq in enumerate(input_ids):
        length = len(seq)
        ids[i, :length] = seq
        mask[i, :length] = 1
        if types is not None:
            types[i, :length] = token_type_ids[i]  # type: ignore[index]
    out = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
    if types is not None:
        out["token_type_ids"] = torch.from_numpy(types)
    return out
