"""Tokenizing ahead of the model on CPU: wall time against model-only and tokenizer-only time.

Run by hand, niced (the machine is shared):

    nice -n 10 .venv/bin/python benchmarks/score_overlap.py --pairs 4000 --rounds 3

The bundled backbone saved as our cross-encoder (max length 128, batch 64), loaded the way bulk
scoring loads it (`load_predictor(backend="auto")`: ONNX Runtime fp32, 512-token batches), scores
`--pairs` pairs whose texts never repeat (STS-B's words recombined into sentences of 5-24 words,
as `benchmarks/pretokenize.py` writes them). In one process, in alternating rounds, with the word
cache emptied before each measurement (every word is new to the first block, as in a fresh process):

- `wall`: `predict_raw` as scoring calls it: the producer tokenizes blocks while the model runs;
- `model_only`: the same batches tokenized and padded beforehand, then only the forward passes;
- `tokens_only`: tokenizing, sorting and padding those batches, no model;
- `before`: the path scoring took before: the tokenizer's own call on every pair, then the model
  over the same token-budget batches (one sort of the whole call), one after the other;
- `hf_tokenizer`: that tokenizer call alone.

The machine is shared, so load moves between measurements; inside the `wall` call the predictor's
own counters (`StreamStats`) split its time under one load: the model's forward passes, the time
the model waited for a tokenized block, and the producer's time.

Each configuration runs with ONNX Runtime on `--threads` (default 2 and 1: on 2 cores the producer
and the model's threads share them). Writes `benchmarks/results/score_overlap.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from common import BATCH, MAX_LENGTH, RESULTS_DIR, save_backbone  # benchmarks/common.py
from pretokenize import write_pairs  # benchmarks/pretokenize.py

from simpair.models.token_stream import StreamStats, tokenized_blocks  # noqa: E402
from simpair.runtime.budget import run_budget_batches  # noqa: E402
from simpair.runtime.loader import load_predictor  # noqa: E402


def _load_avg() -> float:
    return os.getloadavg()[0]


def measure(predictor, a: list[str], b: list[str]) -> dict[str, float]:  # noqa: ANN001
    """One round of every measurement on one loaded predictor."""
    out: dict[str, float] = {}
    n = len(a)
    pad_id = predictor.tokenizer.pad_token_id or 0
    block_rows = predictor.block_rows or max(1024, 8 * BATCH)

    def encode(lo: int, hi: int) -> list:
        return predictor.encoder.pairs(a[lo:hi], b[lo:hi], 1)

    predictor.encoder.words.clear()
    began = time.perf_counter()
    blocks = list(
        tokenized_blocks(
            encode, n, block_rows, BATCH, predictor.max_batch_tokens, pad_id, StreamStats(), False
        )
    )
    out["tokens_only_s"] = time.perf_counter() - began

    import torch

    began = time.perf_counter()
    lanes = ThreadPoolExecutor(predictor.lanes)  # as the scoring loop runs them: `lanes` batches at once
    with torch.inference_mode(), lanes:
        for block in blocks:
            list(lanes.map(lambda batch: predictor._forward(batch.inputs[0]), block))
    out["model_only_s"] = time.perf_counter() - began
    del blocks

    predictor.encoder.words.clear()
    stats = predictor.token_stats
    before = dataclasses.replace(stats)
    began = time.perf_counter()
    predictor.predict_raw(a, b, batch_size=BATCH)
    out["wall_s"] = time.perf_counter() - began
    # inside that call: the model's time, its waits for a block, the producer's time (same load)
    out["in_run_model_s"] = stats.model_s - before.model_s
    out["in_run_waited_s"] = stats.wait_s - before.wait_s
    out["in_run_producer_s"] = stats.tokenize_s - before.tokenize_s
    out["padding_share"] = 1 - (stats.tokens - before.tokens) / (stats.padded_tokens - before.padded_tokens)

    tok = predictor.tokenizer
    began = time.perf_counter()
    enc = tok(a, b, truncation=True, max_length=MAX_LENGTH)
    out["hf_tokenizer_s"] = time.perf_counter() - began
    run_budget_batches(enc, BATCH, predictor.max_batch_tokens, pad_id, predictor._forward, predictor.lanes)
    out["before_s"] = time.perf_counter() - began
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="2,1")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "score_overlap.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_pairs(work / "pairs.parquet", args.pairs, seed=1)
        table = pq.read_table(work / "pairs.parquet")
        a, b = table["text_a"].to_pylist(), table["text_b"].to_pylist()
        model_dir = save_backbone("cross", work)
        threads = [int(t) for t in args.threads.split(",")]
        predictors = {t: load_predictor(model_dir, backend="auto", threads=t) for t in threads}
        for p in predictors.values():  # warm-up: the graph, the encoder's probe check, the allocator
            p.predict_raw(a[:256], b[:256], batch_size=BATCH)
        runs: dict[str, list[dict[str, float]]] = {}
        for r in range(args.rounds):
            for t, predictor in predictors.items():
                import torch

                torch.set_num_threads(t)
                load = _load_avg()
                res = measure(predictor, a, b) | {"load_avg_1m": load}
                runs.setdefault(f"threads={t}", []).append(res)
                print(
                    f"round {r} threads {t}: wall {res['wall_s']:.2f}s, "
                    f"model only {res['model_only_s']:.2f}s, "
                    f"tokens only {res['tokens_only_s']:.2f}s, before {res['before_s']:.2f}s "
                    f"(HF tokenizer {res['hf_tokenizer_s']:.2f}s); in the call: model "
                    f"{res['in_run_model_s']:.2f}s, waited {res['in_run_waited_s']:.2f}s; load {load:.1f}",
                    flush=True,
                )
    summary: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "python": sys.version.split()[0],
        "pairs": args.pairs,
        "model": "bundled backbone as cross-encoder, ONNX Runtime fp32 (backend auto), 512-token batches",
        "runs": runs,
    }
    medians = {}
    for key, values in runs.items():
        med = {m: float(np.median([v[m] for v in values])) for m in values[0]}
        med["wall_over_model"] = med["wall_s"] / med["model_only_s"]
        med["wall_over_model_plus_tokens"] = med["wall_s"] / (med["model_only_s"] + med["tokens_only_s"])
        med["before_over_wall"] = med["before_s"] / med["wall_s"]
        med["pairs_per_s"] = args.pairs / med["wall_s"]
        med["in_run_wall_over_model"] = med["wall_s"] / med["in_run_model_s"]
        medians[key] = med
        print(
            f"{key}: wall/model {med['wall_over_model']:.3f}, wall/(model+tokens) "
            f"{med['wall_over_model_plus_tokens']:.3f}, before/wall {med['before_over_wall']:.3f}, "
            f"{med['pairs_per_s']:.0f} pairs/s; in the call: model {med['in_run_model_s']:.2f}s, "
            f"waited {med['in_run_waited_s']:.2f}s, producer {med['in_run_producer_s']:.2f}s"
        )
    summary["medians"] = medians
    args.out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
