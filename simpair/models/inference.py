"""Run a model over token ids in length-sorted batches: the one inference loop every caller uses.

`forward_sorted` sorts rows longest first (peak memory shows at once, each batch pads little), pads
each batch to its own longest row, runs it under `torch.inference_mode` and autocast, and puts the
outputs back in input order. `Predictor` (texts), dev scoring during training and `evaluate_model`
(cached tokens, `raw_outputs`, `sentence_embeddings`) all go through it. Cached tokens are read from
their memory-mapped columns one batch at a time (`TokenInput`), so scoring a split holds its outputs,
never its ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from simpair.models.batching import pad_batch
from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.device import autocast
from simpair.models.io import EncoderModel
from simpair.pair_tokens import PairTokens, TokenInput
from simpair.progress import progress as progress_bar

TokenRows = Sequence[Sequence[int]]
# one model input: token ids per row, and token type ids per row (or None); or cached pair tokens
Inputs = tuple[TokenRows, TokenRows | None] | TokenInput


def _count(inputs: Inputs) -> int:
    return len(inputs) if isinstance(inputs, TokenInput) else len(inputs[0])


def _padded(inputs: Inputs, idx: np.ndarray, pad_id: int) -> dict[str, torch.Tensor]:
    if isinstance(inputs, TokenInput):
        return {k: torch.from_numpy(v) for k, v in inputs.pad(idx, pad_id).items()}
    ids, types = inputs
    return pad_batch([ids[i] for i in idx], pad_id, [types[i] for i in idx] if types is not None else None)


def first_output(outputs: list[torch.Tensor]) -> torch.Tensor:
    """The only output, in float32 (cross-encoder logits, raw sentence embeddings)."""
    return outputs[0].float()


@torch.inference_mode()
def forward_sorted(
    model: EncoderModel,
    inputs: Sequence[Inputs],
    pad_id: int,
    device: torch.device,
    dtype: torch.dtype | None,
    *,
    batch_size: int = 64,
    lengths: np.ndarray | None = None,
    combine: Callable[[list[torch.Tensor]], torch.Tensor] = first_output,
    progress: bool = False,
    desc: str = "predict",
) -> np.ndarray:
    """The model's outputs for every row, in input order (float32).

    `inputs` holds one or more aligned inputs (row i of each belongs to item i), each run through the
    model on the same batch of rows; `combine` turns their outputs for one batch into one tensor
    (default: the only output), e.g. both orders of a pair averaged, or the cosine of two sentences.
    Rows are sorted by `lengths` (default: the first input's row lengths), longest first.
    """
    n = _count(inputs[0])
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    if lengths is None:
        first = inputs[0]
        if isinstance(first, TokenInput):
            raise ValueError("cached pair tokens come with their lengths")
        lengths = np.fromiter((len(x) for x in first[0]), dtype=np.int64, count=n)
    order = np.argsort(-lengths, kind="stable")
    was_training = model.training
    model.eval()
    results: list[np.ndarray] = []
    bar = progress_bar(total=n, desc=desc, unit="pair", disable=not progress)
    for start in range(0, n, batch_size):
        idx = order[start : start + batch_size]
        outputs = []
        with autocast(device, dtype):
            for one in inputs:
                batch = {k: v.to(device, non_blocking=True) for k, v in _padded(one, idx, pad_id).items()}
                outputs.append(model(**batch))
        results.append(combine(outputs).float().cpu().numpy())
        bar.update(len(idx))
    bar.close()
    model.train(was_training)
    stacked = np.concatenate(results, axis=0)
    restored = np.empty_like(stacked)
    restored[order] = stacked
    return restored.astype(np.float32)


def normalized(outputs: list[torch.Tensor]) -> torch.Tensor:
    """L2-normalised sentence embeddings (what `Predictor.embed` returns)."""
    return torch.nn.functional.normalize(outputs[0].float(), dim=-1)


def _mean(outputs: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([o.float() for o in outputs]).mean(0)


def _cosine(outputs: list[torch.Tensor]) -> torch.Tensor:
    u, v = outputs
    return torch.nn.functional.cosine_similarity(u.float(), v.float(), dim=-1)


def raw_outputs(
    model: CrossEncoder | BiEncoder,
    pairs: PairTokens,
    pad_id: int,
    device: torch.device,
    dtype: torch.dtype | None,
    symmetric: bool = False,
    batch_size: int = 64,
) -> np.ndarray:
    """Cached pair tokens -> cross: logits (averaged over both orders if symmetric). Bi: cosines."""
    if isinstance(model, CrossEncoder):
        inputs: list[Inputs] = [TokenInput(pairs, "input_ids", "token_type_ids")]
        if symmetric:
            inputs.append(TokenInput(pairs, "input_ids_ba", "token_type_ids_ba"))
        combine = _mean
    else:
        inputs, combine = [TokenInput(pairs, "ids_a"), TokenInput(pairs, "ids_b")], _cosine
    return forward_sorted(
        model, inputs, pad_id, device, dtype, batch_size=batch_size, lengths=pairs.lengths, combine=combine
    )


def sentence_embeddings(
    model: BiEncoder,
    token_lists: list[list[int]],
    pad_id: int,
    device: torch.device,
    dtype: torch.dtype | None,
    batch_size: int = 64,
) -> np.ndarray:
    """Embeddings of already-tokenized sentences (the bi-encoder's forward as it is), in input order."""
    if not token_lists:
        return np.zeros((0, model.hidden_size), dtype=np.float32)
    return forward_sorted(model, [(token_lists, None)], pad_id, device, dtype, batch_size=batch_size)
