"""Leakage: evaluation pairs (dev/test role) that also occur in a split a model may train on.

Models may train on dev splits too (a final refit on all labelled data once the recipe is fixed), so
train- and dev-role splits are both checked as training data: a test pair that sits in STS-B dev is
reported, and dropped from training when a config trains on that dev split.

Identity is `simpair.pairs.pair_key` on cleaned texts, so a pair with its sentences swapped, or
differing only in whitespace or mojibake, still counts. The splits are read in batches and compared
out of core (`simpair.ingest.spill`): a hash pass finds the few pairs that occur in more than one
place, and only those are joined on their exact texts; sha1 `pair_key`s are computed for the
reported rows alone. The report is recomputed only when the set of current dataset versions
changes, and written atomically with its counts in the file's metadata, so reusing it reads none of
its rows.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from simpair.catalog import LEAKAGE_COLUMNS, Catalog, leakage_path
from simpair.ingest import spill
from simpair.ingest.report import LeakageCount, LeakageReport
from simpair.ingest.writer import TMP_PREFIX, atomic_write_parquet, remove_leftovers
from simpair.pairs import pair_keys, sorted_texts

_INPUTS_KEY = b"simpair.leakage_inputs"
_COUNTS_KEY = b"simpair.leakage_counts"
# Bumped when the leakage rows computed from the same datasets change, so an old report is not reused.
LEAKAGE_CODE_VERSION = "3"
_SORT = ["dataset", "split", "train_dataset", "train_split", "pair_id", "train_pair_id"]
_SPLIT = 1 << 40  # pos = split number * 2**40 + row number inside the split


class LeakageInputError(ValueError):
    """A current split the leakage report cannot read; the message names the file."""


def _readable(path: Path, dataset: str, split: str) -> Path:
    """The split file, once its footer reads: a broken file fails the report with its name, not a trace."""
    try:
        pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise LeakageInputError(f"{path}: cannot read split {dataset}/{split}: {exc}") from exc
    return path


def _splits(catalog: Catalog) -> pl.LazyFrame | None:
    """Every split of every current dataset as one lazy scan, with its role and a global row pos.

    The key columns are cast to text: an empty split written without rows may carry Null-typed
    columns, and one such split must not break the concatenation of all the others.
    """
    scans = []
    for dataset in catalog.datasets():
        for split, role in catalog.splits(dataset).items():
            path = _readable(catalog.split_path(dataset, split), dataset, split)
            scan = pl.scan_parquet(path).with_row_index("row")
            scans.append(
                scan.select(
                    (pl.col("row").cast(pl.Int64) + len(scans) * _SPLIT).alias("pos"),
                    pl.lit(dataset).alias("dataset"),
                    pl.lit(split).alias("split"),
                    pl.lit(role in ("train", "dev")).alias("trains"),
                    pl.lit(role != "train").alias("evaluates"),
                    *(pl.col(c).cast(pl.Utf8) for c in ("pair_id", "text_a", "text_b")),
                )
            )
    return pl.concat(scans) if scans else None


def _leaks(rows: pl.DataFrame) -> pl.DataFrame:
    """Evaluation rows joined to training rows of another split with the same exact (lo, hi)."""
    train = rows.filter("trains").select(
        "lo",
        "hi",
        pl.col("dataset").alias("train_dataset"),
        pl.col("split").alias("train_split"),
        pl.col("pair_id").alias("train_pair_id"),
    )
    joined = rows.filter("evaluates").join(train, on=["lo", "hi"], how="inner")
    joined = joined.filter(  # a split is not its own training data
        (pl.col("dataset") != pl.col("train_dataset")) | (pl.col("split") != pl.col("train_split"))
    )
    return joined.with_columns(pair_keys(joined["lo"], joined["hi"])).select(LEAKAGE_COLUMNS)


def compute_leakage(catalog: Catalog, bucket_rows: int = spill.BUCKET_ROWS) -> pl.DataFrame:
    """One row per (evaluation pair, training pair) sharing a pair_key, across all current datasets."""
    empty = pl.DataFrame(schema=dict.fromkeys(LEAKAGE_COLUMNS, pl.Utf8))
    scan = _splits(catalog)
    if scan is None:
        return empty
    rows = spill.row_count([catalog.split_path(d, s) for d in catalog.datasets() for s in catalog.splits(d)])
    parent = leakage_path(catalog.home).parent
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}leakage-", dir=parent))
    try:
        k = spill.bucket_count(rows, bucket_rows * 8)
        hashed = scan.select("pos", spill.pair_hash("text_a", "text_b", 17).alias("h"))
        cand = spill.repeated(hashed, k, work / "h")
        if cand.height == 0:  # no pair occurs twice anywhere: no need to read the texts again
            return empty
        found = scan.filter(pl.col("pos").is_in(cand["pos"].implode())).select(
            "dataset", "split", "trains", "evaluates", "pair_id", *sorted_texts("text_a", "text_b")
        )
        k = spill.bucket_count(cand.height, bucket_rows)
        parts = [_leaks(bucket) for _, bucket in spill.buckets(found, ["lo", "hi"], k, work / "t")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return pl.concat([empty, *parts]).sort(_SORT) if parts else empty


def _counts(frame: pl.LazyFrame) -> list[LeakageCount]:
    grouped = (
        frame.group_by(["dataset", "split", "train_dataset", "train_split"])
        .agg(pl.col("pair_id").n_unique().alias("pairs"))
        .sort(["dataset", "split", "train_dataset", "train_split"])
        .collect(engine="streaming")
    )
    return [LeakageCount(**row) for row in grouped.iter_rows(named=True)]


def _reused(path: Path, inputs: dict[str, str]) -> LeakageReport | None:
    """The report on disk if it was computed from these inputs, read from its metadata alone."""
    meta = pq.read_schema(path).metadata or {}
    if json.loads(meta.get(_INPUTS_KEY, b"{}")) != inputs:
        return None
    if _COUNTS_KEY in meta:
        counts = [LeakageCount(**c) for c in json.loads(meta[_COUNTS_KEY])]
    else:  # a report written before counts were stored: count it streaming
        counts = _counts(pl.scan_parquet(path))
    rows = pq.ParquetFile(path).metadata.num_rows
    return LeakageReport(status="unchanged", path=str(path), inputs=inputs, rows=rows, counts=counts)


def update_leakage(home: Path) -> LeakageReport:
    """Recompute `<home>/leakage/leakage.parquet` if the current dataset versions changed."""
    catalog = Catalog(home)
    path = leakage_path(catalog.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    inputs = {d: catalog.current_version(d) for d in catalog.datasets()}
    inputs["_leakage_code"] = LEAKAGE_CODE_VERSION
    with FileLock(str(path.parent / ".lock")):
        remove_leftovers(path.parent)
        if path.is_file() and (report := _reused(path, inputs)) is not None:
            return report
        frame = compute_leakage(catalog)
        counts = _counts(frame.lazy())
        meta = {
            _INPUTS_KEY: json.dumps(inputs, sort_keys=True).encode(),
            _COUNTS_KEY: json.dumps([c.model_dump() for c in counts]).encode(),
        }
        atomic_write_parquet(frame.to_arrow().replace_schema_metadata(meta), path)
        return LeakageReport(
            status="computed", path=str(path), inputs=inputs, rows=frame.height, counts=counts
        )
