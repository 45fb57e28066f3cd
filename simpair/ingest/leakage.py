"""Leakage: evaluation pairs (dev/test role) that also occur in a split a model may train on.

Models may train on dev splits too (a final refit on all labelled data once the recipe is fixed), so
train- and dev-role splits are both checked as training data: a test pair that sits in STS-B dev is
reported, and dropped from training when a config trains on that dev split.

Identity is `simpair.pairs.pair_key` on cleaned texts, so a pair with its sentences swapped, or
differing only in whitespace or mojibake, still counts. The splits are read in batches and compared
out of core (`simpair.ingest.spill`): a hash pass finds the few pairs that occur in more than one
place, and only those are joined on their exact texts; sha1 `pair_key`s are computed for the
reported rows alone. Split files this process has just written come with their hashes
(`remember_hashes`), so the hash pass reads only the others. The report is recomputed only when
the set of current dataset versions changes, and written atomically with its counts in the file's
metadata, so reusing it reads none of its rows.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections import OrderedDict
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
# Split files' hashes kept by `remember_hashes`: at most this many rows, which the hash pass holds in
# memory anyway (one bucket).
CACHE_ROWS = spill.BUCKET_ROWS * 8
_cache: OrderedDict[tuple[int, int, int, int], pl.Series] = OrderedDict()
_cache_lock = threading.Lock()


class LeakageInputError(ValueError):
    """A current split the leakage report cannot read; the message names the file."""


def _readable(path: Path, dataset: str, split: str) -> Path:
    """The split file, once its footer reads: a broken file fails the report with its name, not a trace."""
    try:
        pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise LeakageInputError(f"{path}: cannot read split {dataset}/{split}: {exc}") from exc
    return path


def leakage_hash() -> pl.Expr:
    """The hash pass's key of a row of a split (text_a, text_b in either order)."""
    return spill.pair_hash("text_a", "text_b", 17)


def _identity(path: Path) -> tuple[int, int, int, int]:
    stat = path.stat()
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def remember_hashes(path: Path, hashes: list[pl.Series]) -> None:
    """Keep the `leakage_hash` of every row of a split file this process just wrote, in row order.

    The next leakage report in this process then reads no texts of that file for its hash pass (a
    2M-row source: the whole report, 0.9 s of CPU, 2026-11-26); the hashes are computed while the
    rows are in memory, beside the encoding of the file. The file is known by device, inode, size
    and modification time, which a move into the version folder keeps; at most `CACHE_ROWS` hashes
    are kept (8 bytes a row), the oldest dropped first.
    """
    rows = sum(len(h) for h in hashes)
    if rows > CACHE_ROWS:
        return
    found = pl.concat(hashes) if hashes else pl.Series("h", [], dtype=pl.UInt64)
    with _cache_lock:
        _cache[_identity(path)] = found.alias("h")
        while sum(len(h) for h in _cache.values()) > CACHE_ROWS:
            _cache.popitem(last=False)


def _remembered(path: Path) -> pl.Series | None:
    """The hashes `remember_hashes` kept for this very file, if any (and if its rows still match)."""
    with _cache_lock:
        found = _cache.get(_identity(path))
    if found is None or len(found) != pq.ParquetFile(path).metadata.num_rows:
        return None
    return found


def _splits(catalog: Catalog) -> tuple[pl.LazyFrame, pl.LazyFrame] | None:
    """Every split of every current dataset as one lazy scan, with its role and a global row pos;
    and their `pos` and hash `h`, from `remember_hashes` where a split's are kept.

    The key columns are cast to text: an empty split written without rows may carry Null-typed
    columns, and one such split must not break the concatenation of all the others.
    """
    scans = []
    hashed = []
    for dataset in catalog.datasets():
        for split, role in catalog.splits(dataset).items():
            path = _readable(catalog.split_path(dataset, split), dataset, split)
            scan = pl.scan_parquet(path).with_row_index("row")
            pos = (pl.col("row").cast(pl.Int64) + len(scans) * _SPLIT).alias("pos")
            scans.append(
                scan.select(
                    pos,
                    pl.lit(dataset).alias("dataset"),
                    pl.lit(split).alias("split"),
                    pl.lit(role in ("train", "dev")).alias("trains"),
                    pl.lit(role != "train").alias("evaluates"),
                    *(pl.col(c).cast(pl.Utf8) for c in ("pair_id", "text_a", "text_b")),
                )
            )
            kept = _remembered(path)
            if kept is None:
                texts = [pl.col(c).cast(pl.Utf8) for c in ("text_a", "text_b")]
                hashed.append(scan.select(pos, *texts).select("pos", leakage_hash().alias("h")))
            else:
                rows = pl.DataFrame({"h": kept}).with_row_index("row")
                hashed.append(rows.lazy().select(pos, "h"))
    return (pl.concat(scans), pl.concat(hashed)) if scans else None


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
    found_splits = _splits(catalog)
    if found_splits is None:
        return empty
    scan, hashed = found_splits
    rows = spill.row_count([catalog.split_path(d, s) for d in catalog.datasets() for s in catalog.splits(d)])
    parent = leakage_path(catalog.home).parent
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}leakage-", dir=parent))
    try:
        k = spill.bucket_count(rows, bucket_rows * 8)
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
