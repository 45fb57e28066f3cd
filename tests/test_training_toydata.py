"""Helpers (no tests): a tiny pipeline home in the canonical schema, for fast training tests.

Two datasets shaped like the real ones: `msrp` (train/test, 0/1 labels) and `stsb` (train/dev/test,
0-1 scores), with deliberate leaks across them so leakage exclusion has something to find. The
leakage report is computed by the ingest area's own function, not re-implemented here.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from simpair.schema import PAIR_SCHEMA

SUBJECTS = [
    "the cat",
    "a man",
    "the company",
    "the court",
    "a woman",
    "the team",
    "the bank",
    "a child",
    "the government",
    "the market",
    "the doctor",
    "the police",
    "the army",
    "a student",
]
VERBS = ["saw", "bought", "sold", "praised", "attacked", "visited", "ignored", "watched", "helped", "sued"]
OBJECTS = [
    "the house",
    "a car",
    "the shares",
    "the river",
    "a new plan",
    "the report",
    "the city",
    "the old bridge",
    "a small dog",
    "the contract",
]
SYNONYMS = {
    "saw": "noticed",
    "bought": "purchased",
    "sold": "traded",
    "praised": "commended",
    "attacked": "assaulted",
    "visited": "toured",
    "ignored": "disregarded",
    "watched": "observed",
    "helped": "assisted",
    "sued": "took legal action against",
}


def _sentence(rng: random.Random) -> tuple[str, str, str]:
    return rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)


def make_pairs(n: int, seed: int, graded: bool) -> list[tuple[str, str, float]]:
    """Half paraphrases (synonym swap), half unrelated sentences; graded adds partial overlaps."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s, v, o = _sentence(rng)
        a = f"{s} {v} {o} on day {i}."
        kind = i % 3 if graded else i % 2
        if kind == 0:
            b, y = f"On day {i}, {s} {SYNONYMS[v]} {o}.", 1.0
        elif kind == 1:
            s2, v2, o2 = _sentence(rng)
            b, y = f"{s2} {v2} {o2} in week {i + 7}.", 0.0
        else:
            b, y = f"{s} {v} something else on day {i}.", 0.5
        out.append((a, b, y))
    return out


def _table(
    rows: list[tuple[str, str, float]], dataset: str, split: str, version: str, graded: bool
) -> pa.Table:
    n = len(rows)
    return pa.table(
        {
            "pair_id": [f"{dataset}-{split}-{i:04d}" for i in range(n)],
            "text_a": [r[0] for r in rows],
            "text_b": [r[1] for r in rows],
            "label": [None if graded else int(r[2]) for r in rows],
            "score": [r[2] for r in rows] if graded else [None] * n,
            "score_raw": [r[2] * 5 for r in rows] if graded else [float(r[2]) for r in rows],
            "split": [split] * n,
            "dataset": [dataset] * n,
            "dataset_version": [version] * n,
            "source_file": [f"{dataset}/{split}.txt"] * n,
            "source_sha256": ["0" * 64] * n,
            "source_line": list(range(2, n + 2)),
        },
        schema=PAIR_SCHEMA,
    )


def write_dataset(
    home: Path, dataset: str, version: str, splits: dict[str, tuple[str, list]], graded: bool
) -> None:
    """Write one dataset version in the catalog layout and make it current."""
    folder = home / "datasets" / dataset / version
    folder.mkdir(parents=True, exist_ok=True)
    for split, (_, rows) in splits.items():
        pq.write_table(_table(rows, dataset, split, version, graded), folder / f"{split}.parquet")
    manifest = {
        "dataset": dataset,
        "version": version,
        "splits": [{"split": s, "role": r} for s, (r, _) in splits.items()],  # as the ingest writer
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (home / "datasets" / dataset / "CURRENT").write_text(version)


def refresh_leakage(home: Path) -> None:
    from simpair.catalog import Catalog, leakage_path
    from simpair.ingest.leakage import compute_leakage

    path = leakage_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    compute_leakage(Catalog(home)).write_parquet(path)


def write_toy_home(
    home: Path,
    n_train: int = 48,
    n_eval: int = 24,
    msrp_version: str = "v1",
    msrp_train_in_stsb_test: int = 0,
    stsb_dev_in_stsb_test: int = 0,
) -> Path:
    """msrp (train/test) and stsb (train/dev/test); 2 msrp-test pairs also sit in stsb train.

    `msrp_train_in_stsb_test`: that many of the first msrp-train pairs also replace stsb-test pairs.
    `stsb_dev_in_stsb_test`: that many of the last stsb-dev pairs also replace the last stsb-test pairs.
    """
    msrp_train = make_pairs(n_train, 1, graded=False)
    msrp_test = make_pairs(n_eval, 2, graded=False)
    stsb_train = make_pairs(n_train, 3, graded=True) + [(a, b, 0.9) for a, b, _ in msrp_test[:2]]
    stsb_dev = make_pairs(n_eval, 4, graded=True)
    k, d = msrp_train_in_stsb_test, stsb_dev_in_stsb_test
    stsb_test = [(a, b, 0.8) for a, b, _ in msrp_train[:k]] + make_pairs(n_eval, 5, graded=True)[k:]
    stsb_test = stsb_test[: len(stsb_test) - d] + stsb_dev[len(stsb_dev) - d :]
    write_dataset(
        home, "msrp", msrp_version, {"train": ("train", msrp_train), "test": ("test", msrp_test)}, False
    )
    write_dataset(
        home,
        "stsb",
        "s1",
        {
            "train": ("train", stsb_train),
            "dev": ("dev", stsb_dev),
            "test": ("test", stsb_test),
        },
        True,
    )
    refresh_leakage(home)
    return home
