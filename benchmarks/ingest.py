"""Ingest throughput and correctness: simpair vs the usual pandas recipe, on MSRP + STS-B, same run.

Truth is each file's records read with the contract (quotes as text, every physical line a record),
so "kept correctly" means a returned row equals a raw record's label and both sentences exactly.
    nice -n 10 .venv/bin/python benchmarks/ingest.py [--sources DIR] [--repeats 5]
Writes benchmarks/results/ingest.json, then regenerates docs/benchmarks.md (benchmarks/pages.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from simpair import settings
from simpair.contracts import load_contract
from simpair.ingest import run_ingest
from simpair.ingest.reader import read_records
from simpair.ingest.rows import build_candidates, resolve_columns

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "ingest.json"
# (dataset, split, file, header?, label column, sentence columns) for the pandas side
FILES = [
    ("msrp", "train", "msrp/msr_paraphrase_train.txt", True, 0, (3, 4)),
    ("msrp", "test", "msrp/msr_paraphrase_test.txt", True, 0, (3, 4)),
    ("stsb", "train", "stsb/sts-train.csv", False, 4, (5, 6)),
    ("stsb", "dev", "stsb/sts-dev.csv", False, 4, (5, 6)),
    ("stsb", "test", "stsb/sts-test.csv", False, 4, (5, 6)),
]


def truth(sources: Path) -> dict[str, Counter[tuple[float, str, str]]]:
    """Raw records per file as (label, sentence1, sentence2), read under the contracts."""
    out: dict[str, Counter[tuple[float, str, str]]] = {}
    for dataset, _, rel, _, label_col, (a, b) in FILES:
        contract = load_contract(REPO / "data_contracts" / f"{dataset}.yaml")
        records = read_records(sources / rel, contract.format).records
        out[rel] = Counter(
            (float(r.fields[label_col]), r.fields[a], r.fields[b]) for r in records if r.fields
        )
    return out


def pandas_recipe(path: Path, header: bool, correct_settings: bool) -> pd.DataFrame:
    if correct_settings:  # what PROVENANCE.md documents as the correct call
        return pd.read_csv(
            path,
            sep="\t",
            header=0 if header else None,
            quoting=csv.QUOTE_NONE,
            names=None if header else range(9),
            encoding="utf-8-sig",
            keep_default_na=False,
        )
    return pd.read_csv(path, sep="\t", header=0 if header else None, on_bad_lines="skip")


def count_correct(
    frame: pd.DataFrame, label_col: int, cols: tuple[int, int], expected: Counter[tuple[float, str, str]]
) -> int:
    left = expected.copy()
    correct = 0
    for row in frame.itertuples(index=False):
        try:
            key = (float(row[label_col]), str(row[cols[0]]), str(row[cols[1]]))
        except (TypeError, ValueError):
            continue
        if left[key] > 0:
            left[key] -= 1
            correct += 1
    return correct


def time_it(fn, repeats: int) -> tuple[float, object]:  # noqa: ANN001
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def parse_only(sources: Path) -> int:
    """Reader + mapping + cleaning, no checks, no Parquet: the cost of parsing alone."""
    n = 0
    contracts = {d: load_contract(REPO / "data_contracts" / f"{d}.yaml") for d in ("msrp", "stsb")}
    for dataset, split, rel, *_ in FILES:
        contract = contracts[dataset]
        read = read_records(sources / rel, contract.format)
        positions = resolve_columns(contract, read.header, str(sources / rel))
        cand = build_candidates(read.records, contract, positions, split, Path(rel).stem)
        n += len(cand.line) + len(cand.rejected)
    return n


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sources", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sources = Path(settings.sources_dir(args.sources))
    expected = truth(sources)
    total = sum(sum(c.values()) for c in expected.values())

    def ours() -> object:
        with tempfile.TemporaryDirectory() as home:
            return run_ingest(sources, home, REPO / "data_contracts")

    ours_s, report = time_it(ours, args.repeats)
    parse_s, parsed = time_it(lambda: parse_only(sources), args.repeats)
    ours_clean = sum(s.clean for d in report.datasets for s in d.splits)
    ours_quarantined = sum(s.quarantined for d in report.datasets for s in d.splits)

    per_file = []
    sums = {"recipe": [0.0, 0, 0, 0], "correct_settings": [0.0, 0, 0, 0]}
    for _dataset, _split, rel, header, label_col, cols in FILES:
        row: dict[str, object] = {"file": rel, "records": sum(expected[rel].values())}
        for name, correct_settings in (("recipe", False), ("correct_settings", True)):
            try:
                seconds, frame = time_it(
                    lambda p=sources / rel, h=header, c=correct_settings: pandas_recipe(p, h, c), args.repeats
                )
            except Exception as exc:  # noqa: BLE001 - the failure itself is the measurement
                row[name] = {"error": f"{type(exc).__name__}: {exc}"[:200], "rows": 0, "correct": 0}
                continue
            kept = frame.dropna(subset=[frame.columns[i] for i in (label_col, *cols)])
            correct = count_correct(kept, label_col, cols, expected[rel])
            row[name] = {
                "seconds": seconds,
                "rows": len(frame),
                "rows_after_dropna": len(kept),
                "correct": correct,
            }
            acc = sums[name]
            acc[0] += seconds
            acc[1] += len(frame)
            acc[2] += len(kept)
            acc[3] += correct
        per_file.append(row)

    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}",
        "command": "nice -n 10 .venv/bin/python benchmarks/ingest.py",
        "repeats": args.repeats,
        "records": total,
        "simpair": {
            "end_to_end_seconds": ours_s,
            "end_to_end_rows_per_s": total / ours_s,
            "parse_clean_seconds": parse_s,
            "parse_clean_rows_per_s": parsed / parse_s,
            "clean": ours_clean,
            "quarantined": ours_quarantined,
            "accounted_for": ours_clean + ours_quarantined,
        },
        "pandas": {
            name: {
                "seconds": v[0],
                "rows_per_s": v[1] / v[0] if v[0] else None,
                "rows": v[1],
                "rows_after_dropna": v[2],
                "correct": v[3],
            }
            for name, v in sums.items()
        },
        "per_file": per_file,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    import pages  # benchmarks/pages.py: both docs pages, from the results JSON

    pages.write()
    print(json.dumps(result["simpair"], indent=2), json.dumps(result["pandas"], indent=2))


if __name__ == "__main__":
    main()
