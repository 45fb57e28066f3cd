"""Token-budget batches: length-sorted batches capped by tokens (padding included), not only by pairs.

On CPU a 64-pair batch of MSRP-length pairs is ~3,400 tokens and a layer's activations fall out of
the caches; batches of ~512 tokens ran ~1.4x faster with the same FLOPs (docs/experiments.md). The
ONNX Runtime backend (fp32, int8, OpenVINO) and the bf16 torch path on CPU set `MAX_BATCH_TOKENS` as
their predictor's `max_batch_tokens`; the cutting itself is the scoring loop's
(`simpair.models.token_stream.cut_batches`), where batches are made while the model runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from simpair.models.token_stream import cut_batches, run_ahead
from simpair.pair_tokens.encode import Encoded

MAX_BATCH_TOKENS = 512


def run_budget_batches(
    enc: Any,
    batch_size: int,
    max_batch_tokens: int,
    pad_id: int,
    forward: Callable[[dict[str, torch.Tensor]], np.ndarray],
    lanes: int = 1,
) -> np.ndarray:
    """`forward` over token-budget batches of an already tokenized call (`input_ids` and, where the
    model reads them, `token_type_ids` as lists), outputs back in input order (fp32): the scoring loop
    on rows tokenized beforehand, as one block, `lanes` batches at once (`run_ahead`)."""
    ids: list[list[int]] = enc["input_ids"]
    types: list[list[int]] | None = enc.get("token_type_ids")
    lengths = np.fromiter(map(len, ids), np.int64, count=len(ids))
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((i for row in ids for i in row), np.int64, count=int(offsets[-1]))
    flat_types = None if types is None else np.fromiter((t for row in types for t in row), np.int64)
    encoded = Encoded(flat, offsets, flat_types)
    return run_ahead(
        lambda lo, hi: [encoded],
        len(ids),
        forward,
        batch_size=batch_size,
        pad_id=pad_id,
        max_tokens=max_batch_tokens,
        block_rows=max(len(ids), 1),
        first_rows=max(len(ids), 1),  # one block: one sort of the whole call
        lanes=lanes,
    )[0]


__all__ = ["MAX_BATCH_TOKENS", "cut_batches", "run_budget_batches"]
