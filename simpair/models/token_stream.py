"""Tokenize ahead of the model: the batch loop every scoring forward pass runs, on CPU and on CUDA.

A call's rows are cut into blocks (`block_rows`, a few batches' worth; the first an eighth of that,
since the model waits for it). A producer thread
(`simpair.pair_tokens.ahead`) tokenizes each block through the encoder pretokenize uses
(`simpair.pair_tokens.encode`: the Rust backend straight into flat numpy arrays), sorts it longest
first, cuts it into batches of at most `batch_size` rows (and, with a token budget, at most that many
tokens counting padding) and pads each batch; the calling thread runs the model on the batches
already made (or, with `lanes`, that many lane threads run them at once and the calling thread puts
their outputs in place). At most `DEPTH` blocks wait, so memory stays flat, and the model waits only when the
tokenizer is slower than it. Outputs come back in input order.

Rows are sorted within their block, not across the whole call, so batches pad a little more than a
whole-call sort would; `StreamStats` counts the padding. A row's fp32 score does not depend on its
batch-mates beyond float rounding (2e-7 on the test models, docs/scoring.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch

from simpair.pair_tokens.ahead import Ahead
from simpair.pair_tokens.encode import Encoded
from simpair.pair_tokens.template import ragged_take
from simpair.progress import progress as progress_bar

BLOCK_ROWS = 1024  # rows tokenized together: big enough to sort well, small enough to start at once
DEPTH = 2  # tokenized blocks waiting for the model at most

# rows [lo, hi) of the call -> one `Encoded` per model input (a symmetric cross-encoder: both orders)
EncodeRows = Callable[[int, int], list[Encoded]]
Forward = Callable[[dict[str, torch.Tensor]], np.ndarray]


@dataclass
class StreamStats:
    """What the producer and the model did, summed over calls (read by benchmarks and tests)."""

    blocks: int = 0  # blocks tokenized, counted as each is ready (the producer's side)
    batches: int = 0  # batches the model has run
    tokenize_s: float = 0.0  # producer seconds: tokenizing, sorting and padding
    wait_s: float = 0.0  # seconds the model waited for a block
    model_s: float = 0.0  # the calling thread's seconds from a block's first batch to its last output
    padded_tokens: int = 0  # tokens fed to the model, padding included
    tokens: int = 0  # tokens fed to the model, padding excluded


@dataclass(frozen=True)
class Batch:
    """Rows of the call (positions in its input) and their padded inputs, one per model input."""

    rows: np.ndarray
    inputs: list[dict[str, torch.Tensor]] = field(default_factory=list)


def cut_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Positions of length-sorted batches (longest first, stable) of at most `batch_size` rows and, with
    `max_tokens`, at most that many tokens counting padding (always at least one row)."""
    order = np.argsort(-lengths, kind="stable")
    if max_tokens is None:
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    out, start = [], 0
    while start < len(order):
        longest = int(lengths[order[start]])  # sorted longest first: the first row sets the width
        size = max(1, min(batch_size, max_tokens // max(longest, 1)))
        out.append(order[start : start + size])
        start += size
    return out


def pad(encoded: Encoded, idx: np.ndarray, pad_id: int, pin: bool = False) -> dict[str, torch.Tensor]:
    """Rows `idx` right-padded to their longest: input_ids, attention_mask (and token_type_ids), int64,
    the tensors `simpair.models.batching.pad_batch` makes, with numpy gathers instead of a row loop."""
    lengths = np.diff(encoded.offsets)[idx].astype(np.int64)
    width = max(int(lengths.max(initial=0)), 1)
    mask = np.arange(width)[None, :] < lengths[:, None]
    take = ragged_take(encoded.offsets[idx].astype(np.int64), lengths)
    ids = np.full((len(idx), width), pad_id, dtype=np.int64)
    ids[mask] = encoded.ids[take]
    out = {"input_ids": ids, "attention_mask": mask.astype(np.int64)}
    if encoded.types is not None:
        types = np.zeros((len(idx), width), dtype=np.int64)
        types[mask] = encoded.types[take]
        out["token_type_ids"] = types
    tensors = {k: torch.from_numpy(v) for k, v in out.items()}
    return {k: v.pin_memory() for k, v in tensors.items()} if pin else tensors


def tokenized_blocks(
    encode: EncodeRows,
    n: int,
    block_rows: int,
    batch_size: int,
    max_tokens: int | None,
    pad_id: int,
    stats: StreamStats,
    pin: bool,
    first_rows: int | None = None,
) -> Iterator[list[Batch]]:
    # the model waits for the first block: keep it short (default an eighth of the others)
    first = first_rows or max(batch_size, block_rows // 8)
    for lo, hi in zip([0, *range(first, n, block_rows)], [*range(first, n, block_rows), n], strict=True):
        if lo >= hi:
            continue
        began = time.perf_counter()
        inputs = encode(lo, hi)
        lengths = inputs[0].lengths
        batches = [
            Batch(lo + idx, [pad(one, idx, pad_id, pin) for one in inputs])
            for idx in cut_batches(lengths, batch_size, max_tokens)
        ]
        stats.tokenize_s += time.perf_counter() - began
        stats.blocks += 1
        yield batches


def run_ahead(
    encode: EncodeRows,
    n: int,
    forward: Forward,
    *,
    batch_size: int,
    pad_id: int,
    max_tokens: int | None = None,
    block_rows: int | None = None,
    stats: StreamStats | None = None,
    lanes: int = 1,
    pin: bool = False,
    progress: bool = False,
    desc: str = "predict",
    first_rows: int | None = None,
) -> np.ndarray:
    """`forward` on every batch of every model input, tokenized ahead in a producer thread.

    `lanes` batches of a block run at once, each in its own thread (`forward` must then be safe to
    call concurrently, as an ONNX Runtime session is); every batch is the same whichever lane runs
    it, so outputs do not depend on `lanes`. Returns float32 outputs shaped (inputs, n, ...) in input
    order. An error while tokenizing is raised here; an error in `forward` stops the producer before
    it is raised.
    """
    stats = stats if stats is not None else StreamStats()
    block_rows = block_rows or max(BLOCK_ROWS, 8 * batch_size)
    results: np.ndarray | None = None
    bar = progress_bar(total=n, desc=desc, unit="pair", disable=not progress)
    blocks = tokenized_blocks(encode, n, block_rows, batch_size, max_tokens, pad_id, stats, pin, first_rows)
    ahead = Ahead(blocks, depth=DEPTH, name="simpair-tokenize-ahead")
    pool = ThreadPoolExecutor(lanes, thread_name_prefix="simpair-lane") if lanes > 1 else None

    def run(batch: Batch) -> list[np.ndarray]:
        return [np.asarray(forward(one), dtype=np.float32) for one in batch.inputs]

    try:
        with ahead:
            for block in ahead:
                began = time.perf_counter()
                for batch, outs in zip(block, pool.map(run, block) if pool else map(run, block), strict=True):
                    stats.model_s += time.perf_counter() - began  # the model's wall time, lanes at once
                    began = time.perf_counter()
                    stats.batches += 1
                    mask = batch.inputs[0]["attention_mask"]
                    stats.padded_tokens += int(mask.numel())
                    stats.tokens += int(mask.sum())
                    if results is None:
                        results = np.empty((len(outs), n, *outs[0].shape[1:]), dtype=np.float32)
                    for k, out in enumerate(outs):
                        results[k, batch.rows] = out
                    bar.update(len(batch.rows))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        stats.wait_s += ahead.wait_s
        bar.close()
    if results is None:
        return np.zeros((1, 0), dtype=np.float32)
    return results
