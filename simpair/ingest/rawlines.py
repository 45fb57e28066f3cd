"""The raw line of every candidate row, kept as its chunk's own bytes beside the part, not as a column.

The quarantine keeps each rejected record's raw line, so every candidate row must be able to give
it back: a duplicate or a bad extra value is only found after the parse. As a Parquet column the
raw lines cost about half of every part's bytes, encoded, written and read back for the few rows
ever rejected there (2M STS-B-shaped rows, 2026-11-27: 0.3 s of 4.7 s wall). Instead, the rows of
the vectorised path carry where their line sits in the chunk (`raw_at`, `raw_len`), the chunk's
bytes are written once as they are beside the part (`<part>.raw`), and `filled` reads back just the
lines it is asked for. Rows of the per-record path keep their line in `raw`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from simpair.ingest.chunks import Chunk

SUFFIX = ".raw"


def sidecar(part: Path) -> Path:
    """Where the chunk bytes of `part` are."""
    return part.with_suffix(SUFFIX)


def write(path: Path, chunk: Chunk) -> None:
    with open(path, "wb") as out:
        out.write(memoryview(chunk))


def without_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows as a part stores them: `raw` left null where `raw_at` says where the line is."""
    if frame["raw_at"].null_count() == frame.height:
        return frame
    return frame.with_columns(pl.when(pl.col("raw_at").is_null()).then(pl.col("raw")).alias("raw"))


def filled(rows: pl.DataFrame, part: Path) -> pl.DataFrame:
    """`rows` (read from `part`) with `raw` read back from the part's chunk bytes where it was left null."""
    at = rows["raw_at"]
    wanted = at.is_not_null()
    if not wanted.any():
        return rows
    starts = at.filter(wanted).to_numpy()
    lengths = rows["raw_len"].filter(wanted).to_numpy().astype(np.int64)
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    # the bytes of every wanted line, one after another: only their pages of the file are read
    where = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
    data = np.memmap(sidecar(part), dtype=np.uint8, mode="r")[where]
    lines = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(data))
    raw = rows["raw"].clone().scatter(np.flatnonzero(wanted.to_numpy()), pl.Series(lines))
    return rows.with_columns(raw)
