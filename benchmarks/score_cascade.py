"""The bi -> cross cascade against its own full cross-encoder and sentence-transformers' CrossEncoder.

Run by hand, niced (the machine is shared), with a trained MSRP cross-encoder and the pipeline home
that holds its dev split (the band is fitted there); the bi stage is a trained paraphrase bi-encoder
(`--bi`) or, by default, the cross-encoder's backbone untouched:

    nice -n 10 .venv/bin/python benchmarks/score_cascade.py --cross HOME/models/msrp-cross-... --home HOME
    nice -n 10 .venv/bin/python benchmarks/score_cascade.py --cascade MODEL_DIR     # an already fitted one
    nice -n 10 .venv/bin/python benchmarks/score_cascade.py --cascade MODEL_DIR --quick   # a smoke run

Two measurements, all contenders in the same run, on the same cores:

1. **MSRP test** (1,725 pairs, read from the raw file): F1 and accuracy of the cascade, of its
   cross-encoder alone and of `CrossEncoder.predict` on the same weights (probabilities at the
   cascade's threshold, which is the cross-encoder's), the share of pairs the cascade sent to the
   cross-encoder and the share of decisions that differ from the cross-encoder's.
2. **Throughput on a realistic batch** (`--pairs`, default 100,000): MSRP + STS-B sentences, each
   anchor drawn with Zipf frequencies (rank^-1 over a shuffled pool, as `score_distinct.py`), paired
   half with its nearest neighbour under the bi stage's embeddings (mined: paraphrase-like pairs near
   the boundary) and half with a random partner. Ours is `score_inbox` end to end (read, validate,
   score, write, ledger; model load and ONNX export included), the cascade on every pair and its
   cross-encoder alone on the first `--cross-pairs`; theirs is `CrossEncoder.predict` (batch 64,
   sigmoid) on the first `--st-pairs`, already in memory, model load excluded.

Each contender's wall seconds and this process's CPU seconds are recorded (ONNX Runtime and torch threads
included): on a shared machine the CPU seconds are the comparable cost, wall seconds only on an idle one.

Writes `benchmarks/results/score_cascade.json` (or `--out`) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import BATCH, MAX_LENGTH, RESULTS_DIR, SHARED, msrp_test_pairs, sentence_pool, stsb_sentences

RESULTS = RESULTS_DIR / "score_cascade.json"


def cascade_dir(args: argparse.Namespace, work: Path) -> Path:
    """The cascade to measure: `--cascade`, or fitted now from `--cross` (+ `--bi`) on the home's dev."""
    if args.cascade:
        return Path(args.cascade)
    from simpair.ensemble import fit_cascade

    if not (args.cross and args.home):
        raise SystemExit("give --cascade, or --cross and --home (the dev split the band is fitted on)")
    members = [Path(args.cross)] + ([Path(args.bi)] if args.bi else [])
    began = time.perf_counter()
    out = fit_cascade(
        members,
        args.home,
        work / "cascade",
        args.max_disagreement,
        zero_shot=not args.bi,
        band_rule=args.band_rule,
    )
    print(f"fitted {out} in {time.perf_counter() - began:.0f} s", flush=True)
    return out


def pool_embeddings(bi: object, pool: list[str], cache: Path | None) -> np.ndarray:
    """The bi stage's vectors of the pool, read from `cache` (.npy) when it holds as many rows, else
    encoded (and saved there): encoding the whole pool costs minutes of CPU on every run otherwise."""
    if cache is not None and cache.is_file():
        emb = np.load(cache)
        if len(emb) == len(pool):
            return emb
    emb = np.asarray(bi.embed(pool, batch_size=BATCH), dtype=np.float32)  # type: ignore[attr-defined]
    if cache is not None:
        np.save(cache, emb)
    return emb


def mined_pairs(
    bi: object, n: int, path: Path, pool_limit: int | None, seed: int = 0, cache: Path | None = None
) -> dict:
    """n pairs: Zipf-drawn anchors, half with their nearest neighbour (bi embeddings), half random."""
    pool = list(dict.fromkeys(sentence_pool(SHARED) + stsb_sentences(SHARED)))
    rng = np.random.default_rng(seed)
    rng.shuffle(pool)
    pool = pool[:pool_limit] if pool_limit else pool
    began = time.perf_counter()
    emb = pool_embeddings(bi, pool, cache)
    neighbour = np.empty(len(pool), dtype=np.int64)
    for start in range(0, len(pool), 2048):
        sims = emb[start : start + 2048] @ emb.T
        sims[np.arange(len(sims)), np.arange(start, start + len(sims))] = -np.inf  # not itself
        neighbour[start : start + len(sims)] = sims.argmax(axis=1)
    weights = np.arange(1, len(pool) + 1, dtype=np.float64) ** -1.0
    anchors = rng.choice(len(pool), size=n, p=weights / weights.sum())
    mined = rng.random(n) < 0.5
    partners = np.where(mined, neighbour[anchors], rng.choice(len(pool), size=n, p=weights / weights.sum()))
    table = pa.table(
        {
            "pair_id": [f"c{i:08d}" for i in range(n)],
            "text_a": [pool[i] for i in anchors],
            "text_b": [pool[i] for i in partners],
        }
    )
    pq.write_table(table, path, row_group_size=65_536)
    distinct = len(np.union1d(anchors, partners))
    return {"pool": len(pool), "distinct_sentences": int(distinct), "mined_share": float(mined.mean()),
            "setup_seconds": time.perf_counter() - began}  # fmt: skip


def timed_score(model: Path, inbox: Path, out: Path, threads: int, precision: str = "fp32") -> dict:
    """`score_inbox` end to end (no Prefect), default backend and embedding store."""
    from simpair.scoring import score_inbox

    began, cpu = time.perf_counter(), time.process_time()
    summary = score_inbox(str(inbox), out, str(model), threads=threads, precision=precision)
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    table = pq.read_table(next(out.glob("date=*/*.parquet")))
    return {"rows": summary.rows_scored, "seconds": seconds, "pairs_per_s": summary.rows_scored / seconds,
            "cpu_seconds": cpu, "pairs_per_cpu_s": summary.rows_scored / cpu,
            "sentences_encoded": summary.sentences_encoded, "precision": summary.precision,
            "table": table}  # fmt: skip


def st_cross(model: Path, a: list[str], b: list[str]) -> tuple[np.ndarray, float, float]:
    """`CrossEncoder.predict` probabilities (batch 64, sigmoid), seconds and CPU seconds, load excluded."""
    import torch
    from sentence_transformers import CrossEncoder

    st = CrossEncoder(str(model), device="cpu", max_length=MAX_LENGTH, local_files_only=True)
    began, cpu = time.perf_counter(), time.process_time()
    scores = st.predict(list(zip(a, b, strict=True)), batch_size=BATCH, activation_fn=torch.nn.Sigmoid(),
                        show_progress_bar=False)  # fmt: skip
    return np.asarray(scores, dtype=np.float64), time.perf_counter() - began, time.process_time() - cpu


def msrp_test(model: Path, threads: int, limit: int | None, auto: bool) -> dict:
    from simpair.ensemble import compare_with_cross
    from simpair.metrics.binary_classification import binary_metrics
    from simpair.runtime.cascade import CROSS
    from simpair.runtime.loader import load_predictor

    a, b, gold = msrp_test_pairs(SHARED)
    if limit:
        a, b, gold = a[:limit], b[:limit], gold[:limit]
    cascade = load_predictor(str(model), backend="auto", threads=threads)
    agreement = compare_with_cross(cascade, a, b, BATCH)
    theirs, _, _ = st_cross(model / cascade.spec.members[CROSS], a, b)
    t = cascade.threshold

    def figures(p: np.ndarray) -> dict:
        m = binary_metrics(p, gold, t)
        return {"f1": m["f1"], "accuracy": m["accuracy"]}

    extra = {}
    if auto:  # the cascade in the precision its verdict chose (int8 only ever in the bi stage)
        chosen = compare_with_cross(
            load_predictor(str(model), precision="auto", backend="auto", threads=threads), a, b, BATCH
        )
        extra["cascade_auto"] = figures(chosen.cascade["probability"]) | {
            "share_to_cross": chosen.share_to_cross,
            "disagreement_with_cross": chosen.disagreement,
        }
    return extra | {
        "pairs": len(a),
        "threshold": t,
        "cascade": figures(agreement.cascade["probability"]),
        "cross": figures(agreement.cross["probability"]),
        "sentence_transformers": figures(theirs),
        "share_to_cross": agreement.share_to_cross,
        "disagreement_with_cross": agreement.disagreement,
        "max_abs_diff_cross_vs_st": float(np.max(np.abs(agreement.cross["probability"] - theirs))),
    }


def throughput(model: Path, args: argparse.Namespace, work: Path) -> dict:
    from simpair.runtime.cascade import BI, CROSS
    from simpair.runtime.loader import load_predictor

    cascade = load_predictor(str(model), backend="auto", threads=args.threads)
    inbox = work / "inbox"
    inbox.mkdir()
    batch = mined_pairs(
        cascade.members[BI], args.pairs, inbox / "batch.parquet", args.pool, cache=args.pool_cache
    )
    print(f"batch: {batch}", flush=True)
    full = pq.read_table(inbox / "batch.parquet")
    prefix = work / "inbox-prefix"
    prefix.mkdir()
    pq.write_table(full.slice(0, args.cross_pairs), prefix / "prefix.parquet")

    ours = timed_score(model, inbox, work / "out-cascade", args.threads)
    cross_dir = model / cascade.spec.members[CROSS]
    alone = timed_score(cross_dir, prefix, work / "out-cross", args.threads)
    a = full.column("text_a").to_pylist()[: args.st_pairs]
    b = full.column("text_b").to_pylist()[: args.st_pairs]
    theirs, st_seconds, st_cpu = st_cross(cross_dir, a, b)

    extra = {}
    if args.auto:
        chosen = timed_score(model, inbox, work / "out-cascade-auto", args.threads, "auto")
        stages_auto = chosen.pop("table").column("scored_by").to_numpy(zero_copy_only=False)
        extra["cascade_auto"] = chosen | {"share_to_cross": float(np.mean(stages_auto == "cross"))}
    stages = ours["table"].column("scored_by").to_numpy(zero_copy_only=False)
    labels, cross_labels = ours["table"].column("label").to_numpy(), alone["table"].column("label").to_numpy()
    k = min(len(labels), len(cross_labels))
    cross_p = alone["table"].column("probability").to_numpy()
    m = min(len(cross_p), len(theirs))
    st_pps, st_cpu_pps = len(a) / st_seconds, len(a) / st_cpu
    ours.pop("table"), alone.pop("table")
    return extra | {
        "batch": batch,
        "cascade": ours | {"share_to_cross": float(np.mean(stages == "cross"))},
        "cross": alone,
        "sentence_transformers": {"rows": len(a), "seconds": st_seconds, "pairs_per_s": st_pps,
                                  "cpu_seconds": st_cpu, "pairs_per_cpu_s": st_cpu_pps},
        "cascade_vs_st": ours["pairs_per_s"] / st_pps,
        "cross_vs_st": alone["pairs_per_s"] / st_pps,
        # the machine is shared: CPU seconds of this process are what the contenders cost
        "cascade_vs_st_cpu": ours["pairs_per_cpu_s"] / st_cpu_pps,
        "cross_vs_st_cpu": alone["pairs_per_cpu_s"] / st_cpu_pps,
        "disagreement_with_cross_on_prefix": float(np.mean(labels[:k] != cross_labels[:k])),
        "max_abs_diff_cross_vs_st": float(np.max(np.abs(cross_p[:m] - theirs[:m]))),
    }  # fmt: skip


def verdict(model: Path, args: argparse.Namespace) -> str | None:
    """With `--auto`: the cascade's precision verdict, measured on the home's dev split once and cached."""
    if not args.auto:
        return None
    from simpair.selection.precision_ladder import ensure_verdict

    if not args.home:
        raise SystemExit("--auto measures the precision verdict on the dev split: give --home")
    chosen = ensure_verdict(model, Path(args.home), args.threads)
    return chosen.why(chosen.choose())


def markdown(result: dict) -> str:
    test, speed = result["msrp_test"], result["throughput"]
    rows = [
        "| contender | MSRP test F1 | accuracy | pairs/s on the batch | vs `CrossEncoder.predict` "
        "| pairs per CPU second | vs `CrossEncoder.predict` (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    st = speed["sentence_transformers"]
    names = [("cascade", "cascade (bi -> cross)"), ("cross", "its cross-encoder alone"),
             ("sentence_transformers", "`CrossEncoder.predict`")]  # fmt: skip
    if "cascade_auto" in speed:
        chosen = speed["cascade_auto"]["precision"]  # int8 runs in the bi stage only, bf16 in both
        where = {"int8": "int8 bi stage", "bf16": "bf16, both stages"}.get(chosen, chosen)
        names.insert(1, ("cascade_auto", f"cascade, `auto` ({where})"))
    for key, name in names:
        ratio = speed[key]["pairs_per_s"] / st["pairs_per_s"]
        cpu_ratio = speed[key]["pairs_per_cpu_s"] / st["pairs_per_cpu_s"]
        rows.append(
            f"| {name} | {test[key]['f1']:.4f} | {test[key]['accuracy']:.4f} | "
            f"{speed[key]['pairs_per_s']:.0f} | {ratio:.2f}x | {speed[key]['pairs_per_cpu_s']:.0f} | "
            f"{cpu_ratio:.2f}x |"
        )
    rows.append(
        f"\nShare sent to the cross-encoder: MSRP test {test['share_to_cross']:.1%}, batch "
        f"{speed['cascade']['share_to_cross']:.1%}; decisions that differ from the cross-encoder's: "
        f"MSRP test {test['disagreement_with_cross']:.2%}, "
        f"batch prefix {speed['disagreement_with_cross_on_prefix']:.2%}. Sentences the bi stage encoded: "
        f"{speed['cascade']['sentences_encoded']:,} for {speed['cascade']['rows']:,} pairs."
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cascade", help="an already fitted cascade model directory")
    parser.add_argument("--cross", help="a trained paraphrase cross-encoder (the band is fitted now)")
    parser.add_argument("--bi", help="a trained paraphrase bi-encoder (default: the backbone untouched)")
    parser.add_argument("--home", help="the pipeline home holding the members' dev split")
    parser.add_argument("--max-disagreement", type=float, default=0.005)
    parser.add_argument(
        "--band-rule",
        choices=["crc", "point"],
        default="crc",
        help="dev misses a fitted band may leave (docs/training.md)",
    )
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--cross-pairs", type=int, default=10_000, help="prefix scored by the cross alone")
    parser.add_argument("--st-pairs", type=int, default=5_000, help="prefix scored by CrossEncoder.predict")
    parser.add_argument("--pool", type=int, default=None, help="limit the sentence pool (default: all)")
    parser.add_argument(
        "--pool-cache",
        type=Path,
        default=None,
        help="an .npy of the bi stage's pool vectors, kept between runs of the same bi stage",
    )
    parser.add_argument(
        "--auto",
        action="store_true",
        help="also the cascade in `--precision auto` (its verdict measured on --home's dev)",
    )
    parser.add_argument("--msrp-limit", type=int, default=None, help="first N MSRP test pairs only")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a smoke run: a few hundred pairs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.cross_pairs, args.st_pairs = 400, 200, 200
        args.pool, args.msrp_limit = args.pool or 3000, args.msrp_limit or 200
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="simpair-bench-cascade-"))
    try:
        model = cascade_dir(args, work)
        result = {
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg(),
                        "python": platform.python_version()},
            "threads": args.threads,
            "cascade": json.loads((model / "cascade.json").read_text()),
            "precision_verdict": verdict(model, args),
            "msrp_test": msrp_test(model, args.threads, args.msrp_limit, args.auto),
            "throughput": throughput(model, args, work),
        }  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
