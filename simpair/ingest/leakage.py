"""Leakage: evaluation pairs (dev/test role) that also occur in a split a model may train on.

Models may train on dev splits too (a final refit on all labelled data once the recipe is fixed), so
train- and dev-role splits are both checked as training data: a test pair that sits in STS-B dev is
reported, and dropped from training when a config trains on that dev split.

Identity is `simpair.pairs.pair_key` on cleaned texts, so a pair with its sentences swapped, or
differing only in whitespace or mojibake, still counts. The report is recomputed only when the set
of current dataset versions changes, and written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from filelock import FileLock

from simpair.catalog import LEAKAGE_COLUMNS, Catalog, leakage_path
from simpair.ingest.report import LeakageCount, LeakageReport
from simpair.ingest.writer import atomic_write_parquet, remove_leftovers
from simpair.pairs import pair_key

_INPUTS_KEY = b"simpair.leakage_inputs"
# Bumped when the leakage rows computed from the same datasets change, so an old report is not reused.
LEAKAGE_CODE_VERSION = "3"


def _keyed(catalog: Catalog, dataset: str, split: str) -> pl.DataFrame:
    frame = catalog.read_split(dataset, split).select("pair_id", "text_a", "text_b")
    keys = [pair_key(a, b) for a, b in zip(frame["text_a"], frame["text_b"], strict=True)]
    return pl.DataFrame({"pair_id": frame["pair_id"], "pair_key": keys})


def compute_leakage(catalog: Catalog) -> pl.DataFrame:
    """One row per (evaluation pair, training pair) sharing a pair_key, across all current datasets."""
    train, evals = [], []
    for dataset in catalog.datasets():
        for split, role in catalog.splits(dataset).items():
            keyed = _keyed(catalog, dataset, split).with_columns(
                pl.lit(dataset).alias("dataset"), pl.lit(split).alias("split")
            )
            if role in ("train", "dev"):
                train.append(keyed)
            if role != "train":
                evals.append(keyed)
    empty = pl.DataFrame(schema=dict.fromkeys(LEAKAGE_COLUMNS, pl.Utf8))
    if not train or not evals:
        return empty
    train_all = pl.concat(train).rename(
        {"dataset": "train_dataset", "split": "train_split", "pair_id": "train_pair_id"}
    )
    joined = pl.concat(evals).join(train_all, on="pair_key", how="inner")
    # a split is not its own training data
    joined = joined.filter(
        (pl.col("dataset") != pl.col("train_dataset")) | (pl.col("split") != pl.col("train_split"))
    )
    return joined.select(LEAKAGE_COLUMNS).sort(
        ["dataset", "split", "train_dataset", "train_split", "pair_id"]
    )


def _counts(frame: pl.DataFrame) -> list[LeakageCount]:
    grouped = (
        frame.group_by(["dataset", "split", "train_dataset", "train_split"])
        .agg(pl.col("pair_id").n_unique().alias("pairs"))
        .sort(["dataset", "split", "train_dataset", "train_split"])
    )
    return [LeakageCount(**row) for row in grouped.iter_rows(named=True)]


def update_leakage(home: Path) -> LeakageReport:
    """Recompute `<home>/leakage/leakage.parquet` if the current dataset versions changed."""
    catalog = Catalog(home)
    path = leakage_path(catalog.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    inputs = {d: catalog.current_version(d) for d in catalog.datasets()}
    inputs["_leakage_code"] = LEAKAGE_CODE_VERSION
    with FileLock(str(path.parent / ".lock")):
        remove_leftovers(path.parent)
        if path.is_file():
            meta = pq.read_schema(path).metadata or {}
            if json.loads(meta.get(_INPUTS_KEY, b"{}")) == inputs:
                frame = pl.read_parquet(path)
                return LeakageReport(
                    status="unchanged",
                    path=str(path),
                    inputs=inputs,
                    rows=frame.height,
                    counts=_counts(frame),
                )
        frame = compute_leakage(catalog)
        table = frame.to_arrow()
        table = table.replace_schema_metadata({_INPUTS_KEY: json.dumps(inputs, sort_keys=True).encode()})
        atomic_write_parquet(table, path)
        return LeakageReport(
            status="computed", path=str(path), inputs=inputs, rows=frame.height, counts=_counts(frame)
        )
