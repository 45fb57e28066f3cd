"""Pretokenize throughput on texts that never repeat: pairs/s and peak memory, by words against by texts.

Real logs rarely repeat a sentence, so tokenizing each distinct text once saves nothing there; their
words repeat all the time. This writes `--rows` synthetic pairs (real STS-B words, recombined into
sentences of 5-24 words, every text distinct) to a Parquet file, then streams it through the
pretokenize path (`iter_pair_batches` -> `write_tokens`: read, tokenize, write row groups) with the
default MiniLM tokenizer, once per form and path, each in a fresh process, in alternating rounds:

- `words`: today's path, each distinct ' '-separated word tokenized once and kept across batches,
  the next batch read while this one is tokenized;
- `texts`: each distinct text tokenized once (the same code with the word path off);
- `before` (with `--baseline REV`): the `words` path as the code at git revision REV had it
  (`git archive REV simpair`, put first on the child's `PYTHONPATH`), so a change reads off the
  same machine in the same run.

All write byte-identical token files (checked). Peak RSS is the child's `ru_maxrss`; `rss_before` is
its resident size once imports and the tokenizer are loaded.

    python benchmarks/pretokenize.py --rows 200k --rounds 2 --out benchmarks/results/pretokenize.json
    python benchmarks/pretokenize.py --rows 1M --forms cross --paths before,words --baseline 4e17aca~1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
STSB_TRAIN = REPO.parent / "shared" / "data" / "stsb" / "sts-train.csv"
MAX_LENGTH = 128
CHILD = r"""
import json, resource, sys, time
from pathlib import Path
try:
    import simpair.pair_tokens.encode as encode
except ImportError:  # code from before the encoder moved (`--baseline`)
    import simpair.tokens.encode as encode
from simpair.models.tiny import default_backbone
from simpair.models.tokenizer import load_tokenizer
from simpair.tokens import iter_pair_batches, write_tokens

source, target, form, path = sys.argv[1:5]
if path == "texts":
    encode.splits_on_spaces = lambda backend: False
tok = load_tokenizer(default_backbone())
rss_before = int(open("/proc/self/statm").read().split()[1]) * 4096
start, cpu = time.perf_counter(), time.process_time()
rows, truncated = write_tokens(iter_pair_batches(Path(source)), Path(target), tok, MAX_LENGTH_, form)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rows": rows, "truncated": truncated, "wall_s": wall, "cpu_s": cpu,
                  "rss_before_mb": rss_before / 2**20, "peak_rss_mb": peak / 2**20,
                  "code": encode.__file__}))
""".replace("MAX_LENGTH_", str(MAX_LENGTH))


def parse_rows(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def write_pairs(path: Path, rows: int, seed: int = 0, chunk: int = 100_000) -> None:
    """`rows` pairs of distinct sentences made of STS-B's words (row groups of `chunk` rows)."""
    words: list[str] = []
    for line in STSB_TRAIN.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) >= 7:
            words += fields[5].split() + fields[6].split()
    vocab = np.array(words)
    rng = np.random.default_rng(seed)
    with pq.ParquetWriter(path, pa.schema([(c, pa.string()) for c in ("pair_id", "text_a", "text_b")])) as w:
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            sides = []
            for _ in range(2):
                counts = rng.integers(5, 25, n)
                picked = vocab[rng.integers(0, len(vocab), counts.sum())]
                ends = np.cumsum(counts)
                sides.append([" ".join(picked[e - k : e]) for e, k in zip(ends, counts, strict=True)])
            ids = [f"p{i}" for i in range(lo, lo + n)]
            w.write_table(pa.table({"pair_id": ids, "text_a": sides[0], "text_b": sides[1]}))


def run_child(
    source: Path, target: Path, form: str, path: str, baseline: Path | None = None
) -> dict[str, float]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if path == "before":
        if baseline is None:
            raise SystemExit("the `before` path needs --baseline REV")
        env["PYTHONPATH"] = os.pathsep.join([str(baseline), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-c", CHILD, str(source), str(target), form, path]
    # run outside the repository: `python -c` puts its working folder first on sys.path
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=source.parent)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if (path == "before") != (baseline is not None and result["code"].startswith(str(baseline))):
        raise SystemExit(f"{path}: ran the code in {result['code']}")
    result["pairs_per_s"] = result["rows"] / result["wall_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", default="200k")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--forms", default="cross,bi")
    parser.add_argument("--paths", default="texts,words")
    parser.add_argument("--baseline", help="git revision whose code the `before` path runs")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = parse_rows(args.rows)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        baseline = None
        if args.baseline:
            baseline = Path(tmp) / "baseline"
            baseline.mkdir()
            archive = subprocess.run(
                ["git", "archive", args.baseline, "simpair"], cwd=REPO, check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
        source = Path(tmp) / "pairs.parquet"
        write_pairs(source, rows)
        for form in args.forms.split(","):
            first: dict[str, Path] = {}
            for r in range(args.rounds):
                for path in args.paths.split(","):
                    target = Path(tmp) / f"{form}-{path}-{r}.parquet"
                    res = run_child(source, target, form, path, baseline)
                    results.setdefault(f"{form}/{path}", []).append(res)
                    first.setdefault(path, target)
                    print(
                        f"{form:5} {path:5} round {r}: {res['pairs_per_s']:9.0f} pairs/s, "
                        f"peak {res['peak_rss_mb']:.0f} MB (before {res['rss_before_mb']:.0f} MB)",
                        flush=True,
                    )
            tables = [pq.read_table(t) for t in first.values()]
            if any(not t.equals(tables[0]) for t in tables[1:]):
                raise SystemExit(f"{form}: the paths wrote different tokens")
            del tables
    runs = results.items()
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "baseline": args.baseline,
        "load_avg_1m_at_end": os.getloadavg()[0],
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "rows": rows,
        "max_length": MAX_LENGTH,
        "runs": results,
        "median_pairs_per_s": {
            k: float(np.median([x["pairs_per_s"] for x in v])) for k, v in results.items()
        },
        "max_peak_rss_mb": {k: max(x["peak_rss_mb"] for x in v) for k, v in runs},
    }
    for form in args.forms.split(","):
        med = summary["median_pairs_per_s"]
        for other in ("texts", "before"):
            if f"{form}/{other}" in med and f"{form}/words" in med:
                print(f"{form}: words/{other} = {med[f'{form}/words'] / med[f'{form}/{other}']:.2f}x")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
