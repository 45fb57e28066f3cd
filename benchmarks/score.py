"""Bulk-scoring benchmark: our streamed scoring vs sentence-transformers on the same weights and pairs.

Run by hand, niced (the machine is shared):

    nice -n 10 .venv/bin/python benchmarks/score.py            # full run (~15 min on 2 cores)
    nice -n 10 .venv/bin/python benchmarks/score.py --quick    # smaller sizes, for a smoke check

What is compared, each measurement in a fresh subprocess (so peak RSS is that run's alone):

- ours: `simpair.scoring.score_inbox` end to end on a Parquet file (read by row groups, validate,
  score in chunks, write the date-partitioned output, ledger), model loaded (in the cache entry the
  run's stages take) and warmed up on 8 pairs before the clock starts;
- theirs: `CrossEncoder.predict` (cross-encoder) or `SentenceTransformer.encode` + cosine
  (bi-encoder) on the same pairs already in memory, model loaded and warmed up on 8 pairs before the
  clock starts.

Same weights: the bundled all-MiniLM-L6-v2 saved once as our cross-encoder (its classification head
seeded) and as our bi-encoder; sentence-transformers loads the very same directories. Same threads,
same max length (128), same batch size (64) except that `--backend onnx` also caps each batch at 512
tokens (its own batching; the interleaved run also times theirs at batch 32 and 8 so the ratio can be
read against their best batch size too). Scores are compared pair by pair (max abs difference).
The machine is shared: run with `--threads 1` next to other jobs, and read the interleaved table.
Pairs are random pairs of MSRP sentences (train + test, ~11k distinct), so sentences repeat the way
they do in duplicate-question batches; the distinct-sentence share is reported with each row.

The real backbone scores about 100-200 pairs/s on 2 cores, so 1M pairs with it would take hours:
throughput is measured on fewer real-backbone pairs, and RSS flatness over 10k/100k/1M pairs with
the tiny model (same code path, same chunking). The table says which is which.

bf16 opt-in (`--precision bf16`, not the default: it does not give identical scores):

- the interleaved run also times ours with the torch forward pass under bf16 autocast
  (`torch_bf16`), with its speed-up and max abs difference against theirs (fp32);
- `--parts impact`: what bf16 does to decisions, with trained models when they exist: MSRP test
  pairs through a paraphrase cross-encoder (max/mean abs score change, share of labels that flip at
  the model's stored dev threshold and at 0.5, accuracy against gold), STS-B test pairs through an
  STS bi-encoder (Spearman against gold in fp32 and bf16, and between the two). Without trained
  models it falls back to the untrained backbone, which is only a proxy (labelled as such).

    nice -n 10 .venv/bin/python benchmarks/score.py --threads 1 --quick --parts interleaved impact

The default (`--parts default`): ours at `--precision auto` (the precision the model's cached verdict
picks; measured first on its dev split in `--default-home` when it has none, as the product does) and
at fp32, against sentence-transformers' `onnx`, `openvino` and ONNX + dynamic int8 backends, which
run in a side virtual environment that `benchmarks/st_backends.py` builds once (optimum-intel does
not install beside transformers 5.x). Theirs on torch runs in both environments, so ratios chain
through it; the table also gives the direct ratio of pairs/s, since in one process with ONNX Runtime
theirs on torch can run slower than alone. Trained models of a pipeline home when they exist (else the
untrained backbone, labelled a proxy); test F1 / Spearman of the chosen precision against fp32; peak
RSS from fresh processes. Merged into score.json under `default_precision` (other keys kept).

    nice -n 10 .venv/bin/python benchmarks/score.py --parts default --default-cross-pairs 300
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
    build_models,
    msrp_test_pairs,
    sentence_pool,
    write_pairs,
)
from score_tables import markdown  # benchmarks/score_tables.py

RESULTS = RESULTS_DIR / "score.json"
# trained models for the decision-impact measurement (a simpair home outside the repo; optional)
TRAINED_CROSS = Path("/tmp/simhome2/models/msrp-cross-20261122T073847Z")
TRAINED_BI = Path("/tmp/simhome2/models/bench-stsb-bi-soup-s42-s7")
PARTS = ("fresh", "interleaved", "tiny", "impact", "default")
# the default (`auto`) row's models: trained ones of a pipeline home (their dev splits are there)
DEFAULT_HOME = Path("/tmp/homeC")
DEFAULT_CROSS = DEFAULT_HOME / "models" / "msrp-cross-20261126T091007Z"
DEFAULT_BI = DEFAULT_HOME / "models" / "stsb-bi-20261126T090718Z"
MODEL_CACHE = Path.home() / ".cache" / "simpair-bench" / "models"
OURS = {"torch": ("torch", "fp32"), "onnx": ("onnx", "fp32"), "torch_bf16": ("torch", "bf16")}


def stsb_test_pairs(shared: Path) -> tuple[list[str], list[str], np.ndarray]:
    """STS-B test pairs with gold 0-5 scores (tab-separated, quoting off; some lines carry extra fields)."""
    a, b, gold = [], [], []
    for line in (shared / "stsb" / "sts-test.csv").read_text(encoding="utf-8-sig").splitlines():
        fields = line.split("\t")
        if len(fields) >= 7 and fields[5].strip() and fields[6].strip():
            gold.append(float(fields[4]))
            a.append(fields[5].strip())
            b.append(fields[6].strip())
    return a, b, np.asarray(gold, dtype=np.float64)


# --------------------------------------------------------------------------------------- workers
def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_ours(
    model: Path, pairs: Path, threads: int, scores_out: Path, backend: str, precision: str = "auto"
) -> dict:
    from simpair.runtime.loader import load_predictor
    from simpair.scoring import score_inbox

    predictor = load_predictor(
        str(model), precision=precision, backend=backend, threads=threads
    )  # the same copy scoring takes
    warm = pq.read_table(pairs, columns=["text_a", "text_b"]).slice(0, 8)
    predictor.predict(warm.column("text_a").to_pylist(), warm.column("text_b").to_pylist())  # as theirs
    loaded = _rss_mb()
    work = Path(tempfile.mkdtemp(prefix="bench-ours-"))
    try:
        inbox = work / "inbox"
        inbox.mkdir()
        os.symlink(pairs, inbox / pairs.name)
        began, began_cpu = time.perf_counter(), time.process_time()
        summary = score_inbox(
            str(inbox),
            work / "out",
            str(model),
            work / "home",
            threads=threads,
            batch_size=BATCH,
            backend=backend,
            precision=precision,
        )
        seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
        [output] = list((work / "out").glob("date=*/*.parquet"))
        np.save(scores_out, pq.read_table(output, columns=["score"]).column("score").to_numpy())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert summary.rows_rejected == 0 and summary.files_scored == 1
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,  # every thread of this process, so a loaded machine does not count against it
        "rows": summary.rows_scored,
        "rss_after_load_mb": loaded,
        "peak_rss_mb": _peak_mb(),
        "loadavg": os.getloadavg(),
    }


def worker_st(model: Path, kind: str, pairs: Path, threads: int, scores_out: Path) -> dict:
    import torch

    table = pq.read_table(pairs, columns=["text_a", "text_b"])
    text_a, text_b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    del table
    if kind == "cross":
        from sentence_transformers import CrossEncoder

        st = CrossEncoder(str(model), device="cpu", max_length=MAX_LENGTH, local_files_only=True)
        st.predict(
            list(zip(text_a[:8], text_b[:8], strict=True)), show_progress_bar=False
        )  # warm-up, as ours
        loaded = _rss_mb()
        began = time.perf_counter()
        scores = st.predict(list(zip(text_a, text_b, strict=True)), batch_size=BATCH,
                            activation_fn=torch.nn.Sigmoid(), show_progress_bar=False)  # fmt: skip
    else:
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(model), device="cpu", local_files_only=True)
        st.max_seq_length = MAX_LENGTH
        st.encode(text_a[:8], show_progress_bar=False)  # warm-up, as ours
        loaded = _rss_mb()
        began = time.perf_counter()
        ea = st.encode(text_a, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True)
        eb = st.encode(text_b, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True)
        scores = np.clip(np.einsum("ij,ij->i", ea, eb), 0.0, 1.0)  # our uncalibrated bi score: clip(cos)
    seconds = time.perf_counter() - began
    np.save(scores_out, np.asarray(scores, dtype=np.float32))
    return {"seconds": seconds, "rows": len(text_a), "rss_after_load_mb": loaded, "peak_rss_mb": _peak_mb()}


def worker_interleaved(
    model: Path, kind: str, st_model: Path, pairs: Path, threads: int, slices: int
) -> dict:
    """Ours (torch, onnx, torch under bf16 autocast) and theirs in one process, taking turns slice by slice.

    On a shared machine the load changes minute to minute; taking turns on small slices exposes all
    of them to the same load, so their ratio is trustworthy even when absolute numbers are not.
    Ours is the scoring step of a chunk (`score_columns`: pair dedup, predictor, truncation flags,
    output columns), without Parquet I/O. Theirs runs at the benchmark's batch size (`st`, as in
    every earlier table) and, for cross-encoders, also at batch 32 (`CrossEncoder.predict`'s default)
    and 8 (its fastest here): our ONNX backend cuts batches by a token budget, and a fair reader
    wants to know how much of the ratio a smaller batch alone would give them. `torch_bf16` is the
    opt-in `--precision bf16` path (where bf16 is native; `bf16_native` says whether it was).
    """
    import torch

    from simpair.models.device import native_bf16
    from simpair.runtime.loader import load_predictor
    from simpair.runtime.model_ref import ModelRef
    from simpair.scoring.scorer import score_columns

    table = pq.read_table(pairs, columns=["text_a", "text_b"])
    text_a, text_b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    ref = ModelRef(model.name, "bench", "", str(model), "paraphrase" if kind == "cross" else "sts", kind)
    ours = {
        name: load_predictor(str(model), precision=p, backend=b, threads=threads)
        for name, (b, p) in OURS.items()
    }
    extra: dict = {}
    if kind == "cross":
        from sentence_transformers import CrossEncoder

        cross = CrossEncoder(str(st_model), device="cpu", max_length=MAX_LENGTH, local_files_only=True)

        def theirs(a: list[str], b: list[str], batch: int = BATCH) -> np.ndarray:
            return cross.predict(list(zip(a, b, strict=True)), batch_size=batch,
                                 activation_fn=torch.nn.Sigmoid(), show_progress_bar=False)  # fmt: skip

        extra = {f"st_b{n}": (lambda a, b, n=n: theirs(a, b, n)) for n in (32, 8)}
    else:
        from sentence_transformers import SentenceTransformer

        bi = SentenceTransformer(str(st_model), device="cpu", local_files_only=True)
        bi.max_seq_length = MAX_LENGTH

        def theirs(a: list[str], b: list[str]) -> np.ndarray:
            ea = bi.encode(a, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True)
            eb = bi.encode(b, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True)
            return np.clip(np.einsum("ij,ij->i", ea, eb), 0.0, 1.0)

    methods = {
        name: (lambda a, b, p=pred, prec=OURS[name][1]:
               score_columns(p, ref, "bench", a, b, np.zeros(len(a), bool), BATCH, precision=prec)
               .column("score").to_numpy())
        for name, pred in ours.items()
    }  # fmt: skip
    methods["st"] = theirs
    methods.update(extra)
    seconds = dict.fromkeys(methods, 0.0)
    scores: dict[str, list[np.ndarray]] = {name: [] for name in methods}
    bounds = np.linspace(0, len(text_a), slices + 1).astype(int)
    for turn, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        names = list(methods)
        first = turn % len(names)
        for name in names[first:] + names[:first]:  # rotate who goes first
            began = time.perf_counter()
            scores[name].append(np.asarray(methods[name](text_a[lo:hi], text_b[lo:hi]), dtype=np.float32))
            seconds[name] += time.perf_counter() - began
    joined = {name: np.concatenate(parts) for name, parts in scores.items()}
    return {
        "pairs_per_s": {name: len(text_a) / sec for name, sec in seconds.items()},
        "max_abs_diff": {name: float(np.abs(joined[name] - joined["st"]).max()) for name in ours},
        "bf16_vs_fp32_max_abs_diff": float(np.abs(joined["torch_bf16"] - joined["torch"]).max()),
        "bf16_native": native_bf16(torch.device("cpu")),
        "onnx_variant": getattr(ours["onnx"], "variant", "plain"),
        "loadavg": os.getloadavg(),
    }


def worker_impact(cross_model: Path, bi_model: Path, threads: int, limit: int) -> dict:
    """fp32 vs bf16 on real test pairs: how far scores move and how many decisions change.

    Both precisions run the torch forward pass (so the difference is the precision alone; ONNX
    Runtime's fp32 scores equal torch's to ~1e-7). The paraphrase model's labels use its own stored
    threshold (tuned on its dev split, in fp32); 0.5 is reported too.
    """
    import torch

    from simpair.metrics.threshold_free import spearman
    from simpair.models.device import native_bf16
    from simpair.runtime.loader import load_predictor

    def both(model: Path, a: list[str], b: list[str]) -> tuple[dict, dict, dict]:
        out, seconds = {}, {}
        for precision in ("fp32", "bf16"):
            predictor = load_predictor(str(model), precision=precision, backend="torch", threads=threads)
            began = time.perf_counter()
            out[precision] = predictor.predict(a, b, batch_size=BATCH)
            seconds[precision] = time.perf_counter() - began
        return out["fp32"], out["bf16"], {p: len(a) / s for p, s in seconds.items()}

    def diffs(x: np.ndarray, y: np.ndarray) -> dict:
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        return {"max_abs_diff": float(d.max()), "mean_abs_diff": float(d.mean()),
                "p99_abs_diff": float(np.quantile(d, 0.99))}  # fmt: skip

    def subset(a: list[str], b: list[str], gold: np.ndarray) -> tuple[list[str], list[str], np.ndarray]:
        """A fixed random sample (test files are ordered by source/genre: a prefix is not representative)."""
        if limit >= len(a):
            return a, b, gold
        keep = np.sort(np.random.default_rng(0).permutation(len(a))[:limit])
        return [a[i] for i in keep], [b[i] for i in keep], gold[keep]

    result: dict = {"bf16_native": native_bf16(torch.device("cpu")), "loadavg_before": os.getloadavg()}
    a, b, labels = subset(*msrp_test_pairs(SHARED))
    fp32, bf16, speed = both(cross_model, a, b)
    meta = json.loads((cross_model / "simpair.json").read_text())
    threshold = float(meta.get("threshold", 0.5))
    result["paraphrase"] = {
        "model": str(cross_model), "trained": "backbone-" not in cross_model.name, "pairs": len(a),
        "threshold": threshold, **diffs(fp32["score"], bf16["score"]),
        "label_flips": int((fp32["label"] != bf16["label"]).sum()),
        "label_flip_share": float((fp32["label"] != bf16["label"]).mean()),
        "flips_at_0.5": int(((fp32["score"] >= 0.5) != (bf16["score"] >= 0.5)).sum()),
        "accuracy_fp32": float((fp32["label"] == labels).mean()),
        "accuracy_bf16": float((bf16["label"] == labels).mean()),
        "pairs_per_s": speed,
    }  # fmt: skip
    a, b, gold = subset(*stsb_test_pairs(SHARED))
    fp32, bf16, speed = both(bi_model, a, b)
    result["sts"] = {
        "model": str(bi_model), "trained": "backbone-" not in bi_model.name, "pairs": len(a),
        **diffs(fp32["score"], bf16["score"]),
        "spearman_fp32": spearman(fp32["score"], gold),
        "spearman_bf16": spearman(bf16["score"], gold),
        "spearman_fp32_vs_bf16": spearman(fp32["score"], bf16["score"]),
        "pairs_per_s": speed,
    }  # fmt: skip
    result["loadavg_after"] = os.getloadavg()
    return result


def _ref(model: Path) -> object:
    """A pinned local model (version `local-…`: nothing is tagged on a registry)."""
    from simpair.models import ModelMetadata
    from simpair.runtime.model_ref import ModelRef

    meta = ModelMetadata.read(model)
    return ModelRef(model.name, "local-bench", "", str(model), meta.task, meta.kind)


def worker_verdict(model: Path, home: Path, threads: int) -> dict:
    """What `--precision auto` picks for the model, the way `simpair score` resolves it.

    A model with no stored verdict is measured first on its dev split in `home` (the ladder), and the
    verdict stored beside it, as `simpair models verdict` (or its registration) does; `resolve_seconds`
    includes that measurement.
    """
    from simpair.models.precision_verdict import PrecisionVerdict
    from simpair.runtime.resolve import resolve
    from simpair.selection.precision_ladder import verdict_for

    had_one = PrecisionVerdict.read(model) is not None
    began = time.perf_counter()
    verdict_for(_ref(model), home)
    precision, why = resolve("auto", "auto", model=_ref(model), home=home)
    verdict = PrecisionVerdict.read(model)
    return {
        "precision": precision,
        "why": why,
        "measured_now": not had_one,
        "resolve_seconds": time.perf_counter() - began,
        "verdict": verdict.to_dict() if verdict else None,
    }


def worker_default(model: Path, kind: str, pairs: Path, threads: int, slices: int) -> dict:
    """Ours at `auto` (the model's cached verdict) and at fp32, and theirs on torch, taking turns.

    Ours is the chunk scoring step (`score_columns`) of the default backend (`auto`: ONNX Runtime on
    CPU); theirs is sentence-transformers on torch, the yardstick the side environment times too.
    """
    import st_backends  # benchmarks/st_backends.py: theirs, as simpair scores the same weights

    from simpair.models.device import native_bf16, pick_device
    from simpair.models.precision_verdict import PrecisionVerdict
    from simpair.runtime.loader import load_predictor
    from simpair.runtime.precision import allowed_rungs
    from simpair.scoring.scorer import score_columns

    device = pick_device("auto")
    verdict = PrecisionVerdict.read(model)
    chosen = verdict.choose(allowed_rungs("auto", device)).precision if verdict else "fp32"
    ref = _ref(model)
    table = pq.read_table(pairs, columns=["text_a", "text_b"])
    text_a, text_b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    loaded = {
        prec: load_predictor(str(model), precision=prec, backend="auto", threads=threads)
        for prec in ("fp32", chosen)
    }
    methods = {
        name: (lambda a, b, p=loaded[prec], prec=prec:
               score_columns(p, ref, "bench", a, b, np.zeros(len(a), bool), BATCH, precision=prec)
               .column("score").to_numpy())
        for name, prec in (("ours_fp32", "fp32"), ("ours_default", chosen))
    }  # fmt: skip
    methods["st"] = st_backends.scorer(kind, st_backends.load(kind, model, "st", MAX_LENGTH), model, BATCH)
    return {**st_backends.take_turns(methods, text_a, text_b, slices), "chosen": chosen,
            "bf16_native": native_bf16(device)}  # fmt: skip


def worker_test_impact(model: Path, kind: str, chosen: str, threads: int) -> dict:
    """Test-split quality of the chosen precision against fp32: MSRP F1 at the model's threshold, or STS-B
    Spearman. The precision was chosen on the dev split; the test split is read here and only here."""
    from simpair.metrics.binary_classification import binary_metrics
    from simpair.metrics.threshold_free import spearman
    from simpair.runtime.loader import load_predictor

    a, b, gold = msrp_test_pairs(SHARED) if kind == "cross" else stsb_test_pairs(SHARED)
    outs, result = {}, {"pairs": len(a), "chosen": chosen}
    for precision in dict.fromkeys(("fp32", chosen)):
        predictor = load_predictor(str(model), precision=precision, backend="auto", threads=threads)
        outs[precision] = out = predictor.predict(a, b, batch_size=BATCH)
        if kind == "cross":
            metrics = binary_metrics(out["probability"], gold, predictor.threshold)
            result[f"f1_{precision}"], result[f"accuracy_{precision}"] = metrics["f1"], metrics["accuracy"]
        else:
            result[f"spearman_{precision}"] = spearman(out["score"], gold)
    got, want = outs[chosen], outs["fp32"]
    result["max_abs_diff"] = float(np.abs(got["score"].astype(np.float64) - want["score"]).max())
    if "label" in want:
        result["label_flips"] = int((got["label"] != want["label"]).sum())
    return result


def _versions() -> dict[str, str]:
    """The main environment's versions of what the default rows compare (theirs on torch runs here too)."""
    from importlib.metadata import version

    names = ("sentence-transformers", "transformers", "torch", "onnxruntime")
    return {name: version(name) for name in names}


def cpu_model() -> str:
    """The CPU's model name and the vector extensions that decide the precision ladder here."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next(
        (line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), ""
    )
    flags = set(
        next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    )
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
    return f"{name or platform.processor()} ({', '.join(f for f in wanted if f in flags) or 'no AVX2'})"


def run_worker(args: list[str], threads: int) -> dict:
    """One measurement in a fresh interpreter with pinned thread counts."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")  # fmt: skip
    done = subprocess.run([sys.executable, __file__, "--worker", *args, "--threads", str(threads)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------- driver
def measure(label: str, model_kind: str, model: Path, st_model: Path | None, pool: list[str], n: int,
            threads: int, reps: int, backends: tuple[str, ...], work: Path, note: str,
            interleave: bool = False, fresh: bool = True) -> dict:  # fmt: skip
    """Ours (each backend) and theirs on the same pairs, alternating `reps` times, fresh processes.

    Best pairs/s and worst peak RSS are kept: alternating spreads a shared machine's noise evenly.
    `fresh=False` skips the fresh-process runs (only the interleaved one, when `interleave`).
    """
    load_before = os.getloadavg()
    pairs = work / f"pairs-{n}.parquet"
    distinct = write_pairs(pool, n, pairs)
    row: dict = {"model": label, "pairs": n, "threads": threads, "note": note, "distinct_share": distinct}
    runs: dict[str, list[dict]] = {b: [] for b in (*backends, "st")}
    scores = {name: work / f"{name}-{n}.npy" for name in runs}
    for _ in range(reps if fresh else 0):
        for backend in backends:
            runs[backend].append(
                run_worker(["ours", str(model), str(pairs), str(scores[backend]), backend], threads)
            )
        if st_model is not None:
            args = [f"st-{model_kind}", str(st_model), str(pairs), str(scores["st"]), "-"]
            runs["st"].append(run_worker(args, threads))
    for name, done in runs.items():
        if not done:
            continue
        row[f"{name}_pairs_per_s"] = max(r["rows"] / r["seconds"] for r in done)
        row[f"{name}_all_pairs_per_s"] = [r["rows"] / r["seconds"] for r in done]
        row[f"{name}_peak_rss_mb"] = max(r["peak_rss_mb"] for r in done)
        row[f"{name}_rss_after_load_mb"] = done[0]["rss_after_load_mb"]
    if interleave and st_model is not None:
        out = run_worker(["interleaved", str(model), str(pairs), str(st_model), model_kind], threads)
        for name, value in out["pairs_per_s"].items():
            row[f"interleaved_{name}_pairs_per_s"] = value
        best_st = max(v for k, v in out["pairs_per_s"].items() if k.startswith("st"))
        for name in OURS:
            row[f"interleaved_{name}_speedup"] = out["pairs_per_s"][name] / out["pairs_per_s"]["st"]
            row[f"interleaved_{name}_speedup_vs_best_st"] = out["pairs_per_s"][name] / best_st
            row[f"interleaved_{name}_max_abs_diff"] = out["max_abs_diff"][name]
        for fp32 in ("torch", "onnx"):
            row[f"interleaved_torch_bf16_speedup_vs_{fp32}"] = (
                out["pairs_per_s"]["torch_bf16"] / out["pairs_per_s"][fp32]
            )
        row["interleaved_bf16_vs_fp32_max_abs_diff"] = out["bf16_vs_fp32_max_abs_diff"]
        row["interleaved_bf16_native"] = out["bf16_native"]
        row["interleaved_onnx_variant"] = out["onnx_variant"]
        row["interleaved_loadavg"] = out["loadavg"]
    if runs["st"]:
        theirs = np.load(scores["st"])
        for backend in backends:
            row[f"{backend}_speedup"] = row[f"{backend}_pairs_per_s"] / row["st_pairs_per_s"]
            row[f"{backend}_max_abs_diff"] = float(np.abs(np.load(scores[backend]) - theirs).max())
    row["loadavg_before"], row["loadavg_after"] = load_before, os.getloadavg()
    print(json.dumps(row), flush=True)
    return row


def model_copy(source: Path) -> Path:
    """The model's files linked into a cache folder outside the repo, where its precision verdict is cached.

    The product caches a verdict beside the model's metadata; the benchmark must not write into a
    pipeline home's models, so it caches the verdict in this copy instead (a rerun reads it back).
    """
    copy = MODEL_CACHE / source.name
    if not copy.is_dir():
        copy.mkdir(parents=True)
        for path in source.iterdir():
            if path.name != "precision_verdict.json":
                (copy / path.name).symlink_to(path.resolve(), target_is_directory=path.is_dir())
    return copy


def measure_default(label: str, kind: str, source: Path, home: Path, trained: bool, pool: list[str],
                    n: int, threads: int, slices: int, work: Path, reps: int = 1) -> dict:  # fmt: skip
    """The default (`auto`) row: ours at the model's chosen precision and at fp32, against every backend
    of sentence-transformers, chained through theirs on torch (timed in both environments).

    ours default / theirs X = (ours default / theirs torch, main env) / (X / theirs torch, side env).

    The direct ratio comes from fresh processes that take turns, `reps` rounds: ours end to end
    (`score_inbox` on Parquet), then each of theirs alone (`predict` / `encode` on pairs in memory).
    Each records wall and CPU seconds. On a shared 2-core machine two processes run at different
    times see different loads, so wall pairs/s from one against the other's says more about the load
    than the engine; pairs per CPU second does not depend on what else runs (`direct_cpu`, with the
    range over rounds). Round 1 runs every backend (peak RSS); later rounds only ours default,
    openvino and onnx-int8, the backends the default is held against.
    """
    import st_backends  # benchmarks/st_backends.py: the side environment and its workers

    model = model_copy(source) if trained else source
    verdict = run_worker(["verdict", str(model), str(home), "-", "-"], threads)
    pairs = work / f"default-{kind}-{n}.parquet"
    distinct = write_pairs(pool, n, pairs)
    main_run = run_worker(["default", str(model), str(pairs), kind, str(slices)], threads)
    side = st_backends.run(kind, source, pairs, threads, slices, work, MAX_LENGTH, BATCH, alone=False)
    fresh: dict[str, list[dict]] = {name: [] for name in ("ours_default", "ours_fp32", *st_backends.BACKENDS)}
    for round_ in range(max(1, reps)):
        for name in fresh if round_ == 0 else ("ours_default", "st_openvino", "st_onnx_int8"):
            if name.startswith("ours"):
                precision = "fp32" if name == "ours_fp32" else "auto"
                args = ["ours", str(model), str(pairs), str(work / f"{name}.npy"), f"auto:{precision}"]
                fresh[name].append(run_worker(args, threads))
            else:
                fresh[name].append(
                    st_backends.run_alone(kind, source, pairs, threads, work, MAX_LENGTH, BATCH, name)
                )
    rss = {name: max(r["peak_rss_mb"] for r in fresh[name]) for name in ("ours_fp32", "ours_default")}
    side["peak_rss_mb"] = {name: max(r["peak_rss_mb"] for r in fresh[name]) for name in st_backends.BACKENDS}
    per_cpu = {name: [r["rows"] / r["cpu_seconds"] for r in runs] for name, runs in fresh.items()}
    per_wall = {name: [r["rows"] / r["seconds"] for r in runs] for name, runs in fresh.items()}

    def ratios(table: dict[str, list[float]], theirs_name: str) -> list[float]:
        """ours default / theirs, round by round (rounds where both ran)."""
        return [o / t for o, t in zip(table["ours_default"], table[theirs_name], strict=False)]

    direct = {
        b: {"cpu": ratios(per_cpu, b), "wall": ratios(per_wall, b)} for b in ("st_openvino", "st_onnx_int8")
    }
    test = run_worker(["test-impact", str(model), kind, main_run["chosen"], "-"], threads)
    mine, theirs = main_run["pairs_per_s"], side["pairs_per_s"]
    row = {
        "model": label, "kind": kind, "source": str(source), "trained": trained, "pairs": n,
        "threads": threads, "distinct_share": distinct, "chosen": main_run["chosen"], "why": verdict["why"],
        "verdict_measured_now": verdict["measured_now"], "verdict": verdict["verdict"],
        "bf16_native": main_run["bf16_native"], "main": main_run, "side": side, "peak_rss_mb": rss,
        "test": test,
        "reps": max(1, reps),
        # fresh processes taking turns: pairs per CPU second and per wall second, every round
        "fresh_pairs_per_cpu_s": per_cpu,
        "fresh_pairs_per_s": per_wall,
        "fresh_loadavg": {name: [r.get("loadavg") for r in runs] for name, runs in fresh.items()},
        # the direct ratio, ours default over theirs, per round; the headline is per CPU second
        "direct_ratios": direct,
        **{f"ours_default_vs_{b}_direct_cpu": min(direct[b]["cpu"]) for b in direct},
        **{f"ours_default_vs_{b}_direct_cpu_range": [min(direct[b]["cpu"]), max(direct[b]["cpu"])]
           for b in direct},
        # ratios to theirs on torch in each environment, and ours chained through it
        "ours_default_vs_st": mine["ours_default"] / mine["st"],
        "ours_fp32_vs_st": mine["ours_fp32"] / mine["st"],
        **{f"{b}_vs_st": theirs[b] / theirs["st"] for b in st_backends.BACKENDS[1:]},
        **{f"ours_default_vs_{b}": (mine["ours_default"] / mine["st"]) / (theirs[b] / theirs["st"])
           for b in st_backends.BACKENDS[1:]},
    }  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke check), results not saved")
    parser.add_argument(
        "--reps", type=int, default=1, help="fresh-process repetitions of the real-model rows"
    )
    parser.add_argument("--tiny-threads", type=int, default=1, help="threads for the tiny-model RSS rows")
    parser.add_argument("--real-cross-pairs", type=int, default=500)
    parser.add_argument("--real-bi-pairs", type=int, default=1500)
    parser.add_argument("--tiny-sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--tiny-st-max", type=int, default=100_000, help="largest size also run through ST")
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS),
        help="fresh: fresh-process rows of the real models; interleaved: taking turns (fp32 + bf16); "
        "tiny: RSS flatness rows; impact: bf16 decision impact on MSRP/STS-B test pairs; "
        "default: ours at --precision auto against sentence-transformers' fast backends (side venv)",
    )  # fmt: skip
    parser.add_argument("--impact-pairs", type=int, default=100_000, help="test pairs per dataset for impact")
    parser.add_argument("--impact-cross", type=Path, default=TRAINED_CROSS, help="trained paraphrase model")
    parser.add_argument("--impact-bi", type=Path, default=TRAINED_BI, help="trained STS bi-encoder")
    parser.add_argument("--default-home", type=Path, default=DEFAULT_HOME, help="pipeline home of the models")
    parser.add_argument("--default-cross", type=Path, default=DEFAULT_CROSS, help="trained paraphrase model")
    parser.add_argument("--default-bi", type=Path, default=DEFAULT_BI, help="trained STS bi-encoder")
    parser.add_argument("--default-cross-pairs", type=int, default=500)
    parser.add_argument("--default-bi-pairs", type=int, default=1500)
    parser.add_argument(
        "--append-quick", action="store_true",
        help="with --quick: append the result to score.json's quick_runs (the full-run rows stay)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.worker is not None:
        import torch

        torch.set_num_threads(args.threads)
        role, model, pairs, scores, backend = args.worker
        if role == "interleaved":  # model, pairs, st_model, kind
            out = worker_interleaved(Path(model), backend, Path(scores), Path(pairs), args.threads, slices=20)
        elif role == "impact":  # cross model, bi model, pair limit, -
            out = worker_impact(Path(model), Path(pairs), args.threads, int(scores))
        elif role == "verdict":  # model, home, -, -
            out = worker_verdict(Path(model), Path(pairs), args.threads)
        elif role == "default":  # model, pairs, kind, slices
            out = worker_default(Path(model), scores, Path(pairs), args.threads, int(backend))
        elif role == "test-impact":  # model, kind, chosen precision, -
            out = worker_test_impact(Path(model), pairs, scores, args.threads)
        elif role == "ours":  # backend[:precision]
            backend, _, precision = backend.partition(":")
            out = worker_ours(
                Path(model), Path(pairs), args.threads, Path(scores), backend, precision or "auto"
            )
        else:
            out = worker_st(Path(model), role.removeprefix("st-"), Path(pairs), args.threads, Path(scores))
        print(json.dumps(out))
        return

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from simpair.models import default_backbone

    if args.quick:
        args.real_cross_pairs, args.real_bi_pairs = 200, 1000
        args.tiny_sizes, args.tiny_st_max = [2000, 20000], 2000
        args.impact_pairs = min(args.impact_pairs, 400)
    parts = set(args.parts)
    pool = sentence_pool(SHARED)
    work = Path(tempfile.mkdtemp(prefix="bench-score-"))
    try:
        models = build_models(work)
        rows = []
        real = bool({"fresh", "interleaved"} & parts)
        plan = [
            ("backbone cross-encoder", "cross", models["backbone-cross"], models["backbone-cross"],
             args.real_cross_pairs, args.threads, args.reps, ("torch", "onnx"), "real weights: throughput"),
            ("backbone bi-encoder", "bi", models["backbone-bi"], Path(default_backbone()),
             args.real_bi_pairs, args.threads, args.reps, ("torch", "onnx"), "real weights: throughput"),
        ] + [
            ("tiny cross-encoder", "cross", models["tiny-cross"],
             models["tiny-cross"] if n <= args.tiny_st_max else None, n, args.tiny_threads, 1, ("torch",),
             "tiny model: RSS flatness")
            for n in args.tiny_sizes
        ]  # fmt: skip
        plan = [p for p in plan if (real if p[-1].startswith("real") else "tiny" in parts)]
        for label, kind, model, st_model, n, threads, reps, backends, note in plan:
            rows.append(measure(label, kind, model, st_model, pool, n, threads, reps, backends, work, note,
                                interleave=note.startswith("real") and "interleaved" in parts,
                                fresh=note.startswith("tiny") or "fresh" in parts))  # fmt: skip
        impact = None
        if "impact" in parts:
            # trained models if present, else the untrained backbone (reported as a proxy only)
            cross = args.impact_cross if (args.impact_cross / "simpair.json").is_file() else None
            bi = args.impact_bi if (args.impact_bi / "simpair.json").is_file() else None
            cross, bi = cross or models["backbone-cross"], bi or models["backbone-bi"]
            impact = run_worker(["impact", str(cross), str(bi), str(args.impact_pairs), "-"], args.threads)
            print(json.dumps(impact), flush=True)
        default_rows = []
        if "default" in parts:
            for kind, source, n in (("cross", args.default_cross, args.default_cross_pairs),
                                    ("bi", args.default_bi, args.default_bi_pairs)):  # fmt: skip
                if n <= 0:  # `--default-bi-pairs 0`: that row is not run (score.json keeps its last one)
                    continue
                trained = (source / "simpair.json").is_file()
                label = (
                    f"{source.name} (trained)" if trained else f"backbone {kind}-encoder (untrained, proxy)"
                )
                model = source if trained else models[f"backbone-{kind}"]
                default_rows.append(measure_default(label, kind, model, args.default_home, trained, pool,
                                                    n, args.threads, 20, work, args.reps))  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "threads": args.threads,
        "command": "nice -n 10 .venv/bin/python benchmarks/score.py"
        + (f" --threads {args.threads}" if args.threads != 2 else "")
        + (" --quick" if args.quick else "")
        + (f" --parts {' '.join(args.parts)}" if parts != set(PARTS) else "")
        + (f" --default-cross-pairs {args.default_cross_pairs}" if args.default_cross_pairs != 500 else "")
        + (f" --default-bi-pairs {args.default_bi_pairs}" if args.default_bi_pairs != 1500 else "")
        + (f" --reps {args.reps}" if args.reps != 1 else ""),
        "sentence_pool": len(pool),
        "rows": rows,
    }
    if impact is not None:
        result["bf16_impact"] = impact
    if default_rows:
        result["default_precision"] = {
            key: result[key] for key in ("when", "machine", "threads", "command")
        } | {
            "cpu": cpu_model(),
            "loadavg_end": os.getloadavg(),
            "main_versions": _versions(),
            "rows": default_rows,
        }
    print(markdown(result))
    if args.quick and args.append_quick:
        saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        saved.setdefault("quick_runs", []).append(result)
        RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if not args.quick and default_rows and parts != set(PARTS):  # the default rows alone: merged in
        rerun, last = {row["kind"] for row in default_rows}, saved.get("default_precision", {})
        kept = [{"when": last.get("when"), **row} for row in last.get("rows", []) if row["kind"] not in rerun]
        result["default_precision"]["rows"] = kept + default_rows  # a row not rerun keeps its last run
        saved["default_precision"] = result["default_precision"]
        RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
    if not args.quick and parts == set(PARTS):  # a partial run must not replace the full table
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(saved | result, indent=2) + "\n")  # older keys (quick runs) kept
        import pages  # benchmarks/pages.py: both docs pages, from the results JSON

        pages.write()


if __name__ == "__main__":
    main()
