"""A split file written from a stream of frames by polars' encoder reads back exactly as pyarrow's writer
wrote it: the same rows in the same order, the same Arrow schema (types, nullability, metadata)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simpair.ingest.splitfile import polars_schema, write_split_file
from simpair.schema import PAIR_SCHEMA

EXTRAS = [pa.field("weight", pa.float64()), pa.field("seen", pa.date32()), pa.field("ok", pa.bool_())]
SCHEMA = pa.schema([*PAIR_SCHEMA, *EXTRAS]).with_metadata(
    {"simpair.dataset": "toy", "simpair.dataset_version": "v1"}
)


def _frame(first: int, rows: int) -> pl.DataFrame:
    numbers = range(first, first + rows)
    return pl.DataFrame(
        {
            "pair_id": [f"p{i}" for i in numbers],
            "text_a": [f"sentence number {i}" for i in numbers],
            "text_b": [f"another sentence {i % 7}" for i in numbers],
            "label": [i % 2 if i % 5 else None for i in numbers],
            "score": [None] * rows,
            "score_raw": [float(i % 2) for i in numbers],
            "split": ["train"] * rows,
            "dataset": ["toy"] * rows,
            "dataset_version": ["v1"] * rows,
            "source_file": ["toy/train.tsv"] * rows,
            "source_sha256": ["ab" * 32] * rows,
            "source_line": list(numbers),
            "weight": [i / 3 for i in numbers],
            "seen": [dt.date(2026, 1, 1 + i % 28) for i in numbers],
            "ok": [i % 3 == 0 for i in numbers],
        },
        schema=polars_schema(SCHEMA),
    )


def test_rows_order_schema_and_metadata_as_written_by_pyarrow(tmp_path: Path) -> None:
    frames = [_frame(0, 1000), _frame(1000, 1), _frame(1001, 5000)]
    write_split_file(tmp_path / "train.parquet", lambda: iter(frames), SCHEMA)
    pq.write_table(pl.concat(frames).to_arrow().cast(SCHEMA), tmp_path / "pyarrow.parquet")
    ours, theirs = pq.ParquetFile(tmp_path / "train.parquet"), pq.ParquetFile(tmp_path / "pyarrow.parquet")
    assert ours.schema_arrow.equals(SCHEMA, check_metadata=True)
    assert ours.schema_arrow.equals(theirs.schema_arrow, check_metadata=True)
    assert ours.schema.equals(theirs.schema)  # the Parquet schema too: required columns stay required
    assert ours.metadata.metadata.keys() == theirs.metadata.metadata.keys()
    assert pq.read_table(tmp_path / "train.parquet").equals(pq.read_table(tmp_path / "pyarrow.parquet"))
    assert pl.read_parquet(tmp_path / "train.parquet").equals(pl.concat(frames))
    group = ours.metadata.row_group(0)  # null counts for every column (the MLflow schema reads them)
    assert all(group.column(i).statistics.has_null_count for i in range(group.num_columns))


def test_no_frames_give_an_empty_file_with_the_schema(tmp_path: Path) -> None:
    write_split_file(tmp_path / "dev.parquet", lambda: iter([]), SCHEMA)
    file = pq.ParquetFile(tmp_path / "dev.parquet")
    assert file.metadata.num_rows == 0
    assert file.schema_arrow.equals(SCHEMA, check_metadata=True)


def test_an_error_of_the_frames_reaches_the_caller_as_raised(tmp_path: Path) -> None:
    def frames() -> Iterator[pl.DataFrame]:
        yield _frame(0, 10)
        raise OSError("part 2 is unreadable")

    with pytest.raises(OSError, match="part 2 is unreadable"):
        write_split_file(tmp_path / "train.parquet", frames, SCHEMA)


def test_a_null_in_a_not_null_column_is_refused(tmp_path: Path) -> None:
    frame = _frame(0, 3).with_columns(pl.Series("text_a", ["x", None, "z"]))
    with pytest.raises(pl.exceptions.PolarsError, match="null"):
        write_split_file(tmp_path / "train.parquet", lambda: iter([frame]), SCHEMA)
