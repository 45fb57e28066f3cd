"""How the cost of the data path grows with rows: wall time, CPU and peak RSS from 100k to 10M rows.

For each size, `benchmarks/scale_data.py` writes STS-B-shaped raw files (0.5% malformed lines, split
80/10/10), then each step runs as a user would run it, in a fresh process under a small wrapper that
reports that process's CPU time (user + sys) and peak RSS (resource.getrusage of its children):

  ingest       `simpair ingest --no-prefect` (the plain path: Prefect's server start is not measured)
  rerun        the same command again, nothing changed
  pretokenize  `simpair pretokenize` of the train split, bi-encoder, the default MiniLM tokenizer
  train        `simpair train`, 50 steps of a tiny 2-layer encoder (so the cost shown is the data's:
               loading and batching the tokens, not the model), dev capped at 1,000 pairs
  evaluate     `simpair evaluate` of that model on the whole test split
  polars       polars' streaming `scan_csv(...).sink_parquet(...)` of the same raw files (the anchor)

It checks clean + quarantined = raw lines at every size, fits time and peak RSS against rows (least
squares), extrapolates to 100M rows, writes benchmarks/results/scale.json and regenerates
docs/benchmarks.md. With `--baseline-code DIR` the ingest and pretokenize steps also run with the code
in DIR (its Python API, same files) at the sizes of `--baseline-sizes`.

    nice -n 10 .venv/bin/python benchmarks/scale.py [--sizes 100k,1M,4M,10M] [--steps ingest,...]
        [--workdir DIR] [--keep] [--baseline-code /path/to/old/checkout]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import scale_data  # benchmarks/scale_data.py, beside this file (a script's folder is on its import path)
import yaml
from scale_measure import PYTHON, fit, machine, measure

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "scale.json"
STEPS = ("ingest", "rerun", "pretokenize", "train", "evaluate", "polars")
TRAIN_STEPS = 50
SIMPAIR = [str(REPO / ".venv" / "bin" / "simpair")]

POLARS = """
import sys, polars as pl
schema = {f"c{i}": pl.String for i in range(9)}
lazy = pl.scan_csv(sys.argv[2:], separator="\\t", has_header=False, quote_char=None, schema=schema,
                   truncate_ragged_lines=True, missing_columns="insert", encoding="utf8-lossy")
lazy.sink_parquet(sys.argv[1])
"""
# The code before streaming, through its Python API (its console script is not installed).
BASELINE_INGEST = """
import json, sys, simpair
print("simpair from", simpair.__file__, flush=True)
from simpair.ingest.pipeline import run_ingest
report = run_ingest(sys.argv[1], sys.argv[2], sys.argv[3])
open(sys.argv[4], "w").write(json.dumps(report.model_dump(), indent=2))
"""
BASELINE_PRETOKENIZE = """
import sys, simpair
print("simpair from", simpair.__file__, flush=True)
from pathlib import Path
from simpair.training.config import TrainConfig
from simpair.training.pretokenize import pretokenize_config
print([(t.split, t.rows) for t in pretokenize_config(TrainConfig.from_yaml(sys.argv[1]), Path(sys.argv[2]))])
"""


def progress(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_configs(tree: Path) -> dict[str, Path]:
    """Training configs for the synthetic set, from configs/stsb-bi.yaml."""
    base = yaml.safe_load((REPO / "configs" / "stsb-bi.yaml").read_text())
    ds = scale_data.DATASET
    bi = {**base, "name": f"{ds}-bi", "backbone": None, "train": [{"dataset": ds, "split": "train"}]}
    bi["evaluate_on"] = [{"dataset": ds, "split": "test"}]
    train_only = {**bi, "name": f"{ds}-bi-train", "dev": {"split": None}, "evaluate_on": []}
    steps = {**bi, "name": f"{ds}-steps", "backbone": "tiny", "epochs": 1, "max_steps": TRAIN_STEPS}
    steps |= {
        "max_dev_samples": 1000,
        "progress": False,
        "output_dir": str(tree / "home" / "models" / "steps"),
    }
    paths = {}
    for key, cfg in (("bi", bi), ("train_only", train_only), ("steps", steps)):
        paths[key] = tree / "configs" / f"{cfg['name']}.yaml"
        paths[key].parent.mkdir(parents=True, exist_ok=True)
        paths[key].write_text(yaml.safe_dump(cfg, sort_keys=False))
    return paths


def accounting(report_path: Path, raw_lines: int) -> dict[str, Any]:
    """clean + quarantined (+ records in no split) against the raw lines the generator wrote."""
    report = json.loads(report_path.read_text())
    ds = next(d for d in report["datasets"] if d["dataset"] == scale_data.DATASET)
    clean = sum(s["clean"] for s in ds["splits"])
    quarantined = sum(s["quarantined"] for s in ds["splits"]) + ds.get("unassigned", 0)
    reasons: dict[str, int] = {}
    for s in ds["splits"]:
        for k, v in s["reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
    clean_by_split = {s["split"]: s["clean"] for s in ds["splits"]}
    return {
        "status": ds["status"],
        "raw_lines": raw_lines,
        "clean": clean,
        "quarantined": quarantined,
        "ok": clean + quarantined == raw_lines,
        "reasons": reasons,
        "clean_by_split": clean_by_split,
    }


def run_size(
    label: str, rows: int, steps: list[str], workdir: Path, baseline: Path | None, evaluate_max_rows: int
) -> dict[str, Any]:
    tree = workdir / label
    progress(f"{label}: generating {rows:,} rows in {tree}")
    manifest = scale_data.generate(rows, tree)
    files = [str(tree / "sources" / scale_data.DATASET / s["file"]) for s in manifest["splits"]]
    home, logs, cfg = tree / "home", tree / "logs", write_configs(tree)
    logs.mkdir(exist_ok=True)
    common = ["--sources", str(tree / "sources"), "--home", str(home), "--contracts", str(tree / "contracts")]
    out: dict[str, Any] = {"rows": rows, "raw_bytes": manifest["raw_bytes"], "steps": {}}
    out |= {"malformed": manifest["malformed"], "generate_s": manifest["seconds"]}
    res = out["steps"]

    def step(name: str, cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
        progress(f"{label}: {name} ...")
        r = res[name] = measure(cmd, logs / f"{name}.log", env)
        tail = "" if r["rc"] == 0 else f"  FAILED rc={r['rc']}: {r['tail'][-300:]!r}"
        cost = f"{r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, {r['peak_rss_mb']:,.0f} MB"
        progress(f"{label}: {name} {cost}{tail}")
        return r

    if "ingest" in steps or "rerun" in steps or set(steps) & {"pretokenize", "train", "evaluate"}:
        step(
            "ingest",
            [*SIMPAIR, "ingest", *common, "--no-prefect", "--report-json", str(tree / "ingest.json")],
        )
        if (tree / "ingest.json").exists():
            out["accounting"] = accounting(tree / "ingest.json", manifest["raw_lines"])
            progress(f"{label}: accounting {out['accounting']}")
    if "rerun" in steps:
        step(
            "rerun", [*SIMPAIR, "ingest", *common, "--no-prefect", "--report-json", str(tree / "rerun.json")]
        )
        if (tree / "rerun.json").exists():
            out["rerun_status"] = accounting(tree / "rerun.json", manifest["raw_lines"])["status"]
    if set(steps) & {"pretokenize", "train", "evaluate"}:
        r = step(
            "pretokenize", [*SIMPAIR, "pretokenize", "--config", str(cfg["train_only"]), "--home", str(home)]
        )
        pairs = out.get("accounting", {}).get("clean_by_split", {}).get("train")
        if r["rc"] == 0 and pairs:
            r["pairs"], r["pairs_per_s"] = pairs, round(pairs / r["wall_s"], 1)
    if set(steps) & {"train", "evaluate"}:
        # dev and test tokens, so the measured training step loads data and trains, nothing else
        step(
            "pretokenize_dev_test",
            [*SIMPAIR, "pretokenize", "--config", str(cfg["steps"]), "--home", str(home)],
        )
        step(
            "train", [*SIMPAIR, "train", "--config", str(cfg["steps"]), "--home", str(home), "--no-evaluate"]
        )
    if "evaluate" in steps and rows > evaluate_max_rows:
        res["evaluate"] = {"rc": None, "skipped": f"above --evaluate-max-rows {evaluate_max_rows:,}"}
        progress(f"{label}: evaluate skipped (above --evaluate-max-rows)")
    elif "evaluate" in steps and res.get("train", {}).get("rc") != 0:
        res["evaluate"] = {"rc": None, "skipped": "no model: the train step did not run or failed"}
        progress(f"{label}: evaluate skipped (no trained model)")
    elif "evaluate" in steps:
        model = str(home / "models" / "steps")
        step("evaluate", [*SIMPAIR, "evaluate", "--model", model, "--split", f"{scale_data.DATASET}/test",
                          "--home", str(home), "--out", str(tree / "evaluation")])  # fmt: skip
    if "polars" in steps:
        r = step("polars", [PYTHON, "-c", POLARS, str(tree / "polars.parquet"), *files])
        if r["rc"] == 0:
            import polars as pl

            r["rows_out"] = pl.scan_parquet(tree / "polars.parquet").select(pl.len()).collect().item()
    if baseline is not None:
        out["baseline"] = run_baseline(label, tree, baseline, cfg["train_only"], manifest["raw_lines"])
    return out


def run_baseline(label: str, tree: Path, code: Path, train_only: Path, raw_lines: int) -> dict[str, Any]:
    """Ingest (and its re-run) and pretokenize with the code in `code`, into a home of their own."""
    home, logs, env = tree / "home-baseline", tree / "logs", {"PYTHONPATH": str(code)}
    args = [str(tree / "sources"), str(home), str(tree / "contracts"), str(tree / "baseline-ingest.json")]
    out: dict[str, Any] = {"code": str(code)}
    for name, cmd in (
        ("ingest", [PYTHON, "-c", BASELINE_INGEST, *args]),
        ("rerun", [PYTHON, "-c", BASELINE_INGEST, *args]),
        ("pretokenize", [PYTHON, "-c", BASELINE_PRETOKENIZE, str(train_only), str(home)]),
    ):
        progress(f"{label}: baseline {name} ...")
        r = out[name] = measure(cmd, logs / f"baseline-{name}.log", env)
        first = Path(r["log"]).read_text(errors="replace").splitlines()[:1]
        r["simpair_from"] = first[0].removeprefix("simpair from ") if first else ""
        if not r["simpair_from"].startswith(str(code)):
            raise RuntimeError(f"baseline {name} ran {r['simpair_from']!r}, not the code in {code}")
        progress(
            f"{label}: baseline {name} {r['wall_s']:.1f} s wall, {r['peak_rss_mb']:,.0f} MB (rc {r['rc']})"
        )
        if name == "ingest" and r["rc"] == 0:
            out["accounting"] = accounting(tree / "baseline-ingest.json", raw_lines)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100k,1M,4M,10M")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--workdir", type=Path, help="where the raw files and homes go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files and homes")
    parser.add_argument(
        "--baseline-code", type=Path, help="an older checkout to run ingest and pretokenize with"
    )
    parser.add_argument("--baseline-sizes", default="100k,1M")
    # evaluating the 10M set's 1M test pairs takes longer than every other step together
    parser.add_argument("--evaluate-max-rows", type=scale_data.parse_rows, default=4_000_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--merge",
        action="store_true",
        help="re-measure only --steps at --sizes and update them in the existing results file",
    )
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; choose from {','.join(STEPS)}")
    labels = [s.strip() for s in args.sizes.split(",") if s.strip()]
    base_labels = {s.strip() for s in args.baseline_sizes.split(",")}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="simpair-scale-", dir="/var/tmp"))
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "command": "nice -n 10 .venv/bin/python benchmarks/scale.py"
        + f" --sizes {args.sizes} --steps {args.steps}"
        + (f" --baseline-code BASE --baseline-sizes {args.baseline_sizes}" if args.baseline_code else ""),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "steps": steps,
        "ingest_path": "simpair ingest --no-prefect",
        "train_steps": TRAIN_STEPS,
        "sizes": {},
    }
    previous = json.loads(args.out.read_text()) if args.merge and args.out.is_file() else None
    if previous is not None:
        note = {"at": result["measured_at"], "sizes": labels, "steps": steps}
        previous.setdefault("remeasured", []).append(note)
        result = previous
    if args.baseline_code:
        git = ["git", "-C", str(args.baseline_code), "rev-parse", "--short", "HEAD"]
        result["baseline_commit"] = subprocess.run(git, capture_output=True, text=True).stdout.strip() or None
    try:
        for label in labels:
            baseline = args.baseline_code if args.baseline_code and label in base_labels else None
            measured = run_size(
                label, scale_data.parse_rows(label), steps, workdir, baseline, args.evaluate_max_rows
            )
            if previous is not None and label in result["sizes"]:
                kept = result["sizes"][label]["steps"]
                kept.update({k: v for k, v in measured["steps"].items() if k in steps})
            else:
                result["sizes"][label] = measured
            result["fits"] = fit(result["sizes"])
            args.out.parent.mkdir(parents=True, exist_ok=True)
            # after every size, so a crash at 10M keeps the smaller sizes
            args.out.write_text(json.dumps(result, indent=2) + "\n")
            if not args.keep:
                shutil.rmtree(workdir / label, ignore_errors=True)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.out.resolve() == RESULTS.resolve():
        import pages  # benchmarks/pages.py: the docs page from the results JSON

        pages.write()
    progress(f"wrote {args.out}")


if __name__ == "__main__":
    main()
