"""Bi-encoder bulk scoring at the speed of distinct sentences: embedding store vs sentence-transformers.

Run by hand, niced (the machine is shared):

    nice -n 10 .venv/bin/python benchmarks/score_distinct.py                    # 1M pairs, ST on 20k
    nice -n 10 .venv/bin/python benchmarks/score_distinct.py --pairs 100000 --st-pairs 5000

Nightly batches repeat sentences: a few appear in thousands of pairs (Zipf-like). The pair file here
draws both sides of every pair from the MSRP + STS-B sentences (`common.sentence_pool` plus STS-B)
with Zipf frequencies (rank^-s over a shuffled pool), written by `common.write_pairs`.

What is measured, each in a fresh subprocess (peak RSS is that process's alone), model load
excluded, same weights (the bundled backbone saved as our bi-encoder, max length 128, batch 64):

- ours: `score_inbox` end to end on the whole file (read, validate, score, write, ledger), with the
  embedding store on (the default): each distinct sentence is encoded once for the whole run;
- ours without the store (`embedding_store=False`, dedup within each chunk only, the old path) on
  the first `--plain-pairs` pairs (default: three 8,192-row chunks, or `--st-pairs` if larger, so
  its in-chunk dedup works as on full chunks), so the store's own gain reads off the same machine;
- theirs: `SentenceTransformer.encode` of both sides + cosine on the first `--st-pairs` pairs
  already in memory (at ~200 pairs/s a million pairs would take over an hour).

Scores are compared pair by pair on the shared prefix (max abs difference). Writes
`benchmarks/results/score_distinct.json`.

`--stack` times a stacked model instead (the backbone as a cross-encoder and as a bi-encoder under a
fixed logistic combiner, the shape of `configs/msrp-stack.yaml`): ours with the store (its bi member
through the store) against ours without, on the same `--pairs`; sentence-transformers has no stack.
Writes `benchmarks/results/score_distinct_stack.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from common import (  # benchmarks/common.py
    BATCH,
    MAX_LENGTH,
    RESULTS_DIR,
    SHARED,
    save_backbone,
    sentence_pool,
    stsb_sentences,
    write_pairs,
)

from simpair.scoring.options import DEFAULT_CHUNK_ROWS  # noqa: E402

RESULTS = RESULTS_DIR / "score_distinct.json"


def zipf_pool(shared: Path, s: float, seed: int) -> tuple[list[str], int]:
    """A pool in which each distinct sentence appears in proportion to rank^-s (ranks shuffled).

    `write_pairs` draws uniformly from the pool it is given, so drawing from this one gives Zipf
    frequencies; the copies are references to one string each. Returns it and the distinct count.
    """
    distinct = list(dict.fromkeys(sentence_pool(shared) + stsb_sentences(shared)))
    np.random.default_rng(seed).shuffle(distinct)
    weights = np.arange(1, len(distinct) + 1, dtype=np.float64) ** -s
    copies = np.maximum(1, np.rint(weights / weights[-1])).astype(np.int64)
    return [text for text, k in zip(distinct, copies, strict=True) for _ in range(k)], len(distinct)


def build_stack(work: Path) -> Path:
    """The backbone as a cross- and a bi-encoder member under a fixed logistic combiner (timing only)."""
    import torch

    from simpair.models import ModelMetadata, build_model, default_backbone, save_model
    from simpair.models.composite import StackSpec
    from simpair.models.tokenizer import load_tokenizer

    backbone, root = default_backbone(), work / "backbone-stack"
    members = ["members/0-cross", "members/1-bi"]
    for name, kind, objective in zip(members, ("cross", "bi"), ("bce", "online_contrastive"), strict=True):
        torch.manual_seed(0)  # the cross-encoder's classification head is new: seed it
        meta = ModelMetadata(
            kind=kind, task="paraphrase", objective=objective, max_length=MAX_LENGTH, backbone=backbone
        )
        save_model(build_model(kind, backbone), load_tokenizer(backbone), root / name, meta)
    StackSpec(
        combiner="logistic", members=members, features=["member:0", "member:1"], mean=[0.0, 0.0],
        scale=[1.0, 1.0], coef=[1.0, 4.0], intercept=-3.0, regularisation=1.0,
    ).write(root)  # fmt: skip
    meta = dict(kind="stacked", task="paraphrase", objective="stack", backbone="stack", threshold=0.5)
    ModelMetadata(**meta).write(root)  # type: ignore[arg-type]
    return root


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_ours(model: Path, pairs: Path, threads: int, scores_out: Path, store: bool) -> dict:
    from simpair.runtime.loader import load_predictor
    from simpair.scoring import score_inbox

    load_predictor(
        str(model), backend="auto", threads=threads
    )  # model load (and ONNX export) before the clock
    work = Path(tempfile.mkdtemp(prefix="bench-distinct-"))
    try:
        (work / "inbox").mkdir()
        os.symlink(pairs, work / "inbox" / pairs.name)
        began = time.perf_counter()
        summary = score_inbox(
            str(work / "inbox"), work / "out", str(model), work / "home", threads=threads,
            batch_size=BATCH, embedding_store=store,
        )  # fmt: skip
        seconds = time.perf_counter() - began
        [output] = list((work / "out").glob("date=*/*.parquet"))
        np.save(scores_out, pq.read_table(output, columns=["score"]).column("score").to_numpy())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "seconds": seconds,
        "rows": summary.rows_scored,
        "pairs_per_s": summary.rows_scored / seconds,
        "sentences_encoded": summary.sentences_encoded,
        "memory_hits": summary.embedding_memory_hits,
        "disk_hits": summary.embedding_disk_hits,
        "peak_rss_mb": _peak_mb(),
    }


def _sentence_transformer(model: Path) -> object:
    from sentence_transformers import SentenceTransformer, models

    try:
        st = SentenceTransformer(str(model), device="cpu", local_files_only=True)
    except Exception:  # a folder without sentence-transformers module files: the same three modules
        body = models.Transformer(str(model), max_seq_length=MAX_LENGTH)
        pooling = models.Pooling(body.get_word_embedding_dimension(), pooling_mode="mean")
        st = SentenceTransformer(modules=[body, pooling, models.Normalize()], device="cpu")
    st.max_seq_length = MAX_LENGTH
    return st


def worker_st(model: Path, pairs: Path, threads: int, scores_out: Path) -> dict:
    table = pq.read_table(pairs, columns=["text_a", "text_b"])
    text_a, text_b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    del table
    st = _sentence_transformer(model)
    began = time.perf_counter()
    ea = st.encode(text_a, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True)
    eb = st.encode(text_b, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True)
    scores = np.clip(np.einsum("ij,ij->i", ea, eb), 0.0, 1.0)  # our uncalibrated bi score: clip(cos)
    seconds = time.perf_counter() - began
    np.save(scores_out, np.asarray(scores, dtype=np.float32))
    return {
        "seconds": seconds,
        "rows": len(text_a),
        "pairs_per_s": len(text_a) / seconds,
        "peak_rss_mb": _peak_mb(),
    }


def run_worker(args: list[str], threads: int) -> dict:
    cmd = [sys.executable, __file__, "--threads", str(threads), "--worker", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"worker {args[0]} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def prefix(path: Path, n: int, out: Path) -> Path:
    """The first n pairs of the file, as their own Parquet file."""
    pq.write_table(pq.read_table(path).slice(0, n), out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument(
        "--st-pairs", type=int, default=20_000, help="prefix timed with ST and without the store"
    )
    parser.add_argument("--plain-pairs", type=int, default=None, help="prefix timed without the store")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent s of sentence frequencies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stack", action="store_true", help="time a stacked model, store vs no store")
    args = parser.parse_args()
    if args.worker is not None:
        import torch

        torch.set_num_threads(args.threads)
        role, model, pairs, scores = args.worker
        if role == "st":
            out = worker_st(Path(model), Path(pairs), args.threads, Path(scores))
        else:
            out = worker_ours(Path(model), Path(pairs), args.threads, Path(scores), store=role == "ours")
        print(json.dumps(out))
        return

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.stack:
        stack_main(args)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-distinct-"))
    try:
        pool, pool_distinct = zipf_pool(SHARED, args.zipf, args.seed)
        pairs = work / "pairs.parquet"
        write_pairs(pool, args.pairs, pairs, seed=args.seed)
        table = pq.read_table(pairs, columns=["text_a", "text_b"])
        distinct = len(set(table.column("text_a").to_pylist()) | set(table.column("text_b").to_pylist()))
        del table
        st_n = min(args.st_pairs, args.pairs)
        head = prefix(pairs, st_n, work / "head.parquet")
        plain_n = min(args.plain_pairs or max(st_n, 3 * DEFAULT_CHUNK_ROWS), args.pairs)
        plain_head = prefix(pairs, plain_n, work / "plain-head.parquet")
        model = save_backbone("bi", work)
        runs = {
            "ours": run_worker(["ours", str(model), str(pairs), str(work / "ours.npy")], args.threads),
            "ours_no_store": run_worker(
                ["plain", str(model), str(plain_head), str(work / "plain.npy")], args.threads
            ),
            "st": run_worker(["st", str(model), str(head), str(work / "st.npy")], args.threads),
        }
        ours, plain, st = (np.load(work / f"{n}.npy") for n in ("ours", "plain", "st"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
        "command": f"nice -n 10 .venv/bin/python benchmarks/score_distinct.py --pairs {args.pairs} "
        f"--st-pairs {args.st_pairs}"
        + (f" --threads {args.threads}" if args.threads != 2 else "")
        + (f" --plain-pairs {args.plain_pairs}" if args.plain_pairs else ""),
        "pairs": args.pairs,
        "st_pairs": st_n,
        "no_store_pairs": plain_n,
        "zipf_s": args.zipf,
        "pool_sentences": pool_distinct,
        "distinct_sentences": distinct,
        "runs": runs,
        "speedup_vs_st": runs["ours"]["pairs_per_s"] / runs["st"]["pairs_per_s"],
        "speedup_vs_no_store": runs["ours"]["pairs_per_s"] / runs["ours_no_store"]["pairs_per_s"],
        "max_abs_diff_vs_st": float(np.abs(ours[:st_n] - st).max()),
        "max_abs_diff_vs_no_store": float(np.abs(ours[:plain_n] - plain).max()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def stack_main(args: argparse.Namespace) -> None:
    """A stacked model on the same Zipf pairs with and without the store (see the module docstring)."""
    work = Path(tempfile.mkdtemp(prefix="bench-distinct-stack-"))
    try:
        pool, pool_distinct = zipf_pool(SHARED, args.zipf, args.seed)
        pairs = work / "pairs.parquet"
        write_pairs(pool, args.pairs, pairs, seed=args.seed)
        model = build_stack(work)
        runs = {
            "ours": run_worker(["ours", str(model), str(pairs), str(work / "ours.npy")], args.threads),
            "ours_no_store": run_worker(
                ["plain", str(model), str(pairs), str(work / "plain.npy")], args.threads
            ),
        }
        ours, plain = np.load(work / "ours.npy"), np.load(work / "plain.npy")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
        "command": f"nice -n 10 .venv/bin/python benchmarks/score_distinct.py --stack --pairs {args.pairs}"
        + (f" --threads {args.threads}" if args.threads != 2 else ""),
        "model": "stack: backbone cross-encoder + backbone bi-encoder, fixed logistic combiner",
        "pairs": args.pairs,
        "zipf_s": args.zipf,
        "pool_sentences": pool_distinct,
        "runs": runs,
        "speedup_vs_no_store": runs["ours"]["pairs_per_s"] / runs["ours_no_store"]["pairs_per_s"],
        "max_abs_diff_vs_no_store": float(np.abs(ours - plain).max()),
    }
    out = RESULTS.with_name("score_distinct_stack.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
