"""Paraphrase-mining benchmark: `simpair mine` vs sentence-transformers' `paraphrase_mining`, same weights.

Run by hand, niced (the machine is shared):

    nice -n 10 .venv/bin/python benchmarks/mine.py                       # 100,000 sentences
    nice -n 10 .venv/bin/python benchmarks/mine.py --sentences 5000      # a smoke check
    nice -n 10 .venv/bin/python benchmarks/mine.py --parts index --vectors V.npy   # index choice only

Parts, each measurement in a fresh subprocess (so peak RSS is that run's alone):

- `mine`: ours (`simpair.mining.run_mine` end to end: read Parquet, encode distinct texts, search,
  write pairs; `--index auto`) and theirs (`SentenceTransformer(dir)` + `util.paraphrase_mining`
  on the texts in memory, `max_pairs` unlimited). The same directory is loaded by both: the bundled
  all-MiniLM-L6-v2 saved as our bi-encoder (with its sentence-transformers files). Theirs searches
  exactly (a full matrix product per chunk), so recall@10 of ours is |our pairs & theirs| / |theirs|.
  Encoding is most of both runs' time; the search is timed apart in ours.
- `index`: exact search vs faiss HNSW vs usearch HNSW on the same vectors (each set of N vectors
  searched for each vector's 10 nearest others): build + search time and recall@10 against exact.
  This is the measurement behind `simpair.mining.index` (docs/mining.md).

Sentences: MSRP + STS-B sentences (about 23k distinct), then variants (a lead-in phrase and/or a
closing phrase added) to reach N; the variants are near-duplicates of real sentences, so a good
index must find them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from common import BATCH, RESULTS_DIR, SHARED, save_backbone  # benchmarks/common.py

RESULTS = RESULTS_DIR / "mine.json"
K = 10
LEADS = ["Reportedly, ", "In short, ", "According to officials, ", "Meanwhile, ", "Notably, ", "Still, "]
TAILS = [", sources said.", ", it was reported.", " again.", ", officials added.", " this week.", " as well."]


def base_sentences(shared: Path) -> list[str]:
    """MSRP and STS-B sentences (train, dev, test), de-duplicated, in file order."""
    seen: dict[str, None] = {}
    for name in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"):
        for line in (shared / "msrp" / name).read_text(encoding="utf-8-sig").splitlines()[1:]:
            fields = line.split("\t")
            if len(fields) == 5:
                seen.update((t.strip(), None) for t in fields[3:5] if t.strip())
    for name in ("sts-train.csv", "sts-dev.csv", "sts-test.csv"):
        for line in (shared / "stsb" / name).read_text(encoding="utf-8-sig").splitlines():
            fields = line.split("\t")
            if len(fields) >= 7:
                seen.update((t.strip(), None) for t in fields[5:7] if t.strip())
    return list(seen)


def sentence_pool(shared: Path, n: int, seed: int = 0) -> list[str]:
    """n distinct sentences: the real ones first, then variants of random real ones."""
    base = base_sentences(shared)
    out = dict.fromkeys(base[:n])
    rng = np.random.default_rng(seed)
    while len(out) < n:
        text = base[int(rng.integers(len(base)))]
        lead, tail = LEADS[int(rng.integers(len(LEADS)))], TAILS[int(rng.integers(len(TAILS)))]
        led = lead + text[:1].lower() + text[1:]
        kind = int(rng.integers(3))
        variant = led if kind == 0 else (text.rstrip(".") + tail if kind == 1 else led.rstrip(".") + tail)
        out.setdefault(variant, None)
    return list(out)[:n]


def build_model(work: Path) -> Path:
    """The bundled backbone saved as our bi-encoder: the same folder the scoring benchmark builds."""
    return save_backbone("bi", work)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pairs_file(path: Path, a: list[int], b: list[int]) -> None:
    np.save(path, np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1).astype(np.int64))


# --------------------------------------------------------------------------------------- workers
def worker_ours(model: Path, sentences: Path, out: Path, threads: int) -> dict:
    import pyarrow.parquet as pq

    from simpair.mining import MineOptions, run_mine
    from simpair.mining import run as mine_run

    timings: dict[str, float] = {}
    original = mine_run.find_pairs

    def timed_find_pairs(**kwargs: object) -> object:
        start = time.perf_counter()
        found = original(**kwargs)
        timings["search_s"] = time.perf_counter() - start
        return found

    class Timed(mine_run.InProcess):
        def run(self, stage, /, **kwargs):  # type: ignore[no-untyped-def]
            return timed_find_pairs(**kwargs) if stage is original else stage(**kwargs)

    options = MineOptions(top_k=K, batch_size=BATCH, threads=threads, show_progress=False)
    start = time.perf_counter()
    summary = run_mine(
        sentences, out.with_suffix(".parquet"), model=str(model), options=options, runner=Timed()
    )
    seconds = time.perf_counter() - start
    table = pq.read_table(out.with_suffix(".parquet"), columns=["id_a", "id_b"])
    _pairs_file(out, [int(x) for x in table["id_a"].to_pylist()], [int(x) for x in table["id_b"].to_pylist()])
    return {
        "seconds": seconds,
        "cpu_s": time.process_time(),
        "peak_rss_mb": _peak_mb(),
        "pairs": summary.pairs,
        "index": summary.index,
        "sentences_encoded": summary.sentences_encoded,
        "embedding_store": summary.embedding_store is not None,
        **timings,
    }


def worker_st(model: Path, sentences: Path, out: Path, threads: int) -> dict:
    import pyarrow.parquet as pq
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import paraphrase_mining

    texts = pq.read_table(sentences, columns=["text"])["text"].to_pylist()
    st = SentenceTransformer(str(model), device="cpu")
    start = time.perf_counter()
    found = paraphrase_mining(st, texts, top_k=K, max_pairs=10**9, batch_size=BATCH)
    seconds = time.perf_counter() - start
    _pairs_file(out, [int(i) for _, i, _ in found], [int(j) for _, _, j in found])
    return {"seconds": seconds, "cpu_s": time.process_time(), "peak_rss_mb": _peak_mb(), "pairs": len(found)}


def run_worker(role: str, model: Path, sentences: Path, out: Path, threads: int) -> dict:
    """One measurement in a fresh interpreter with pinned thread counts."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    args = [sys.executable, __file__, "--worker", role, str(model), str(sentences), str(out)]
    done = subprocess.run([*args, "--threads", str(threads)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"worker {role} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------- parts
def part_mine(n: int, threads: int, work: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = sentence_pool(SHARED, n)
    sentences = work / f"sentences-{n}.parquet"
    pq.write_table(pa.table({"text": texts}), sentences, row_group_size=65_536)
    model = build_model(work)
    ours = run_worker("ours", model, sentences, work / "ours.npy", threads)
    theirs = run_worker("st", model, sentences, work / "theirs.npy", threads)
    mine, ref = np.load(work / "ours.npy"), np.load(work / "theirs.npy")
    common = len({tuple(p) for p in mine} & {tuple(p) for p in ref})
    return {
        "sentences": n,
        "ours": ours,
        "sentence_transformers": theirs,
        "recall_at_10_vs_exact": common / max(len(ref), 1),
    }


def _others(idx: np.ndarray) -> list[set[int]]:
    """Each row's K nearest other vectors (its own row and empty slots dropped)."""
    return [{int(j) for j in row if j != i and j >= 0} for i, row in enumerate(idx)]


def _recall(exact: np.ndarray, approx: np.ndarray) -> float:
    """Share of each vector's K exact nearest others that the index found among its K."""
    truth = [
        set(sorted(row, key=list(full).index)[:K]) for row, full in zip(_others(exact), exact, strict=True)
    ]
    found = [
        set(sorted(row, key=list(full).index)[:K]) for row, full in zip(_others(approx), approx, strict=True)
    ]
    return float(np.mean([len(t & f) / max(len(t), 1) for t, f in zip(truth, found, strict=True)]))


def _timed(fn: object, *args: object) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)  # type: ignore[operator]
    return out, time.perf_counter() - wall, time.process_time() - cpu


def part_index(vectors: np.ndarray, sizes: list[int], threads: int) -> list[dict]:
    """Each of the first n vectors' 10 nearest others: exact vs faiss HNSW vs usearch HNSW."""
    from simpair.mining.index import HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH, HNSW_M, exact_top_k, hnsw_top_k

    def usearch_top(x: np.ndarray) -> np.ndarray:
        from usearch.index import Index

        index = Index(ndim=x.shape[1], metric="ip", dtype="f32", connectivity=HNSW_M,
                      expansion_add=HNSW_EF_CONSTRUCTION, expansion_search=HNSW_EF_SEARCH)  # fmt: skip
        index.add(np.arange(len(x)), x, threads=threads)
        return np.asarray(index.search(x, K + 1, threads=threads).keys, dtype=np.int64)

    rows = []
    for n in sizes:
        x = np.ascontiguousarray(vectors[:n], dtype=np.float32)
        (_, exact), wall, cpu = _timed(exact_top_k, x, x, K + 1)
        row = {"n": n, "exact_s": wall, "exact_cpu_s": cpu}
        (_, approx), wall, cpu = _timed(hnsw_top_k, x, x, K + 1, threads)
        row |= {"faiss_hnsw_s": wall, "faiss_hnsw_cpu_s": cpu, "faiss_recall_at_10": _recall(exact, approx)}
        try:
            found, wall, cpu = _timed(usearch_top, x)
            row |= {
                "usearch_hnsw_s": wall,
                "usearch_hnsw_cpu_s": cpu,
                "usearch_recall_at_10": _recall(exact, found),
            }
        except ImportError:
            row["usearch"] = "not installed"
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def encode_vectors(n: int, threads: int) -> np.ndarray:
    import torch

    from simpair.runtime.loader import load_predictor

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        predictor = load_predictor(build_model(Path(tmp)), device="cpu")
        return predictor.embed(sentence_pool(SHARED, n), batch_size=BATCH)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parts", nargs="+", choices=("mine", "index"), default=["mine", "index"])
    parser.add_argument("--vectors", type=Path, help="index part: precomputed (n, d) vectors (.npy)")
    parser.add_argument("--index-sizes", type=int, nargs="*", help="index part: sizes (default: 10k..N)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.worker is not None:
        role, model, sentences, out = args.worker
        worker = worker_ours if role == "ours" else worker_st
        print(json.dumps(worker(Path(model), Path(sentences), Path(out), args.threads)))
        return

    def run_facts() -> dict:
        return {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{os.cpu_count()} CPU cores shared with other jobs; load before {os.getloadavg()}",
            "threads": args.threads,
            "command": " ".join(["nice -n 10 .venv/bin/python benchmarks/mine.py", *sys.argv[1:]]),
            "top_k": K,
        }

    # each part keeps its own facts; a run of one part leaves the other's last result in the file
    result = json.loads(args.results.read_text()) if args.results.exists() else {}
    if "mine" in args.parts:
        facts = run_facts()
        with tempfile.TemporaryDirectory(prefix="bench-mine-") as tmp:
            result["mine"] = facts | part_mine(args.sentences, args.threads, Path(tmp))
        result["mine"]["loadavg_after"] = os.getloadavg()
        print(json.dumps(result["mine"], indent=2), flush=True)
    if "index" in args.parts:
        facts = run_facts()
        vectors = np.load(args.vectors) if args.vectors else encode_vectors(args.sentences, args.threads)
        sizes = args.index_sizes or sorted({s for s in (10_000, 30_000, len(vectors)) if s <= len(vectors)})
        result["index"] = facts | {
            "vectors": f"{len(vectors)} pool sentences, bundled backbone (fp32, max_length 128)",
            "rows": part_index(vectors, sizes, args.threads),
            "loadavg_after": os.getloadavg(),
        }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
