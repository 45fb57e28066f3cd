"""Atomic, date-partitioned output of scored batches.

Layout under the output location `<out>`:

    date=YYYY-MM-DD/<stem>-<sha12>.parquet             scored rows of one input batch (first scoring)
    _rejects/date=YYYY-MM-DD/<stem>-<sha12>.rejects.parquet   rejected rows with reasons
    _rescored/<model>/<version>/date=YYYY-MM-DD/<stem>-<sha12>.parquet   the batch scored again by
                                                       another model version (same date, own tree)
    _rescored/<model>/<version>/_rejects/date=YYYY-MM-DD/...          its rejected rows
    _staging/<sha256>/chunk-00000.parquet (+ .rejects)  finished chunks of a batch in progress
    _ledger/                                           ledger database and run lock

Readers of `date=*/` (pyarrow.dataset, polars, Spark, Hive) skip `_`-prefixed folders, so they
never see rejects, partial work or the ledger, nor a second version's scores of a batch they
already hold (read `_rescored/<model>/<version>/` for those). Every file is written to a temporary name in its
final folder and renamed into place (`simpair.atomic`): a reader, or a crash, never sees half a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from simpair.atomic import atomic_path

REJECTS_SCHEMA = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("source_sha256", pa.string(), nullable=False),
        pa.field("row_index", pa.int64(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("field", pa.string(), nullable=False),
        pa.field("text_a", pa.string()),
        pa.field("text_b", pa.string()),
        pa.field("pair_id", pa.string()),
        pa.field("run_id", pa.string(), nullable=False),
    ]
)


def batch_stem(name: str, sha256: str) -> str:
    """A file-system-safe output stem: the input's relative name without extension + short hash.

    The hash makes a changed file under the same name a different output, never an overwrite.
    """
    stem = re.sub(r"\.parquet$", "", name, flags=re.IGNORECASE)
    stem = re.sub(r"[^A-Za-z0-9._=-]+", "_", stem.replace("/", "__")).strip("_") or "batch"
    return f"{stem}-{sha256[:12]}"


def output_paths(out: Path, name: str, sha256: str, day: str) -> tuple[Path, Path]:
    """(scored output, rejects) paths of a batch first claimed on `day`."""
    stem = batch_stem(name, sha256)
    return (
        out / f"date={day}" / f"{stem}.parquet",
        out / "_rejects" / f"date={day}" / f"{stem}.rejects.parquet",
    )


def _segment(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_.") or "model"


def rescore_paths(
    out: Path, model_name: str, model_version: str, name: str, sha256: str, day: str
) -> tuple[Path, Path]:
    """(scored output, rejects) paths of a batch scored again by another model version.

    Same `date=` day and file name as its first output, under the version's own tree, so the
    first output stays where readers found it and each version is one folder to read.
    """
    return output_paths(out / "_rescored" / _segment(model_name) / _segment(model_version), name, sha256, day)


def staging_dir(out: Path, sha256: str) -> Path:
    return out / "_staging" / sha256


def chunk_paths(out: Path, sha256: str, idx: int) -> tuple[Path, Path]:
    """(scored part, rejects part) of one chunk. Deterministic, so redoing a chunk overwrites it."""
    base = staging_dir(out, sha256)
    return base / f"chunk-{idx:06d}.parquet", base / f"chunk-{idx:06d}.rejects.parquet"


def write_atomic(table: pa.Table, path: Path) -> None:
    """Write one table as a Parquet file (zstd), atomically and durably."""
    with atomic_path(path, durable=True) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def merge_parts(parts: Iterable[Path], path: Path, schema: pa.Schema) -> int:
    """Concatenate part files, in order, into one Parquet file atomically; returns the row count.

    Streams one row group at a time, so memory is one chunk whatever the batch size.
    """
    rows = 0
    with atomic_path(path, durable=True) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for part in parts:
            source = pq.ParquetFile(part)
            for group in range(source.num_row_groups):
                table = source.read_row_group(group)
                writer.write_table(table.cast(schema) if table.schema != schema else table)
                rows += table.num_rows
    return rows
