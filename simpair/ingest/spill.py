"""The out-of-core engine of ingest: hash partitions on disk, each small enough to process in memory.

Duplicate removal, pair-id uniqueness and leakage all need "which rows share this exact key?" over
every row of a dataset. Whole-dataset hash tables grow with the rows; instead the rows are split by
a hash of their key into `k` Parquet buckets (polars' streaming engine writes them, so the input is
read once in batches and never held whole), and the exact comparison runs inside each bucket. Rows
with equal keys always share a bucket, and the comparison inside a bucket is on the exact key
columns, so a hash collision only puts unrelated rows in the same bucket: it never decides anything.

Measured on 2 cores (2026-11-26, STS-B sentences recombined, 3.6% duplicates): polars' streaming
`group_by` + join back over the whole input keeps every distinct key in memory and does not spill
(peak 1.25 GB at 2M rows, 5.2 GB at 10M; keep-first `unique` 0.87 / 3.6 GB), while hash first,
then exact texts of the candidates only, through these buckets peaks at 0.41 / 0.54 GB for the same
dedupe. DuckDB was not needed. This module is the only place that chooses the engine.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

# Rows of texts per bucket. A bucket of STS-B-length pairs costs about 250 B a row while its keys are
# grouped, so 500k rows keep a bucket near 150 MB; inputs up to this size take one bucket, in memory.
BUCKET_ROWS = 500_000
_SEED = 0x51A1  # any fixed seed: the buckets only live for one run, in one process
_BUCKET = "_bucket"


def row_count(paths: Sequence[Path]) -> int:
    """Rows in Parquet files, from their footers (no data read)."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


def bucket_count(rows: int, bucket_rows: int = BUCKET_ROWS) -> int:
    """How many buckets keep each one near `bucket_rows` rows (1 for small inputs: no disk at all)."""
    return max(1, -(-rows // max(1, bucket_rows)))


def bucket_of(columns: Sequence[str], k: int) -> pl.Expr:
    """The bucket (0..k-1) of a row's key; the same key gives the same bucket in any query of one run."""
    return (pl.struct(list(columns)).hash(_SEED) % k).cast(pl.UInt32)


def buckets(
    frame: pl.LazyFrame, key: Sequence[str], k: int, folder: Path
) -> Iterator[tuple[int, pl.DataFrame]]:
    """(bucket number, rows) for each non-empty bucket of `frame` split by a hash of `key`.

    With k == 1 the query is collected in memory (the input is small); otherwise it is streamed to
    Parquet buckets under `folder` and each bucket is read back whole, one at a time.
    """
    if k == 1:
        yield 0, frame.collect()
        return
    folder.mkdir(parents=True, exist_ok=True)
    frame.with_columns(bucket_of(key, k).alias(_BUCKET)).sink_parquet(
        pl.PartitionBy(folder, key=_BUCKET, include_key=False),
        engine="streaming",
        compression="lz4",
        maintain_order=False,
    )
    for number in range(k):
        files = sorted((folder / f"{_BUCKET}={number}").glob("*.parquet"))
        if files:
            yield number, pl.read_parquet(files)


def repeated(hashed: pl.LazyFrame, k: int, folder: Path) -> pl.DataFrame:
    """The `pos` of rows whose 64-bit key hash `h` occurs more than once.

    A key whose hash occurs once occurs once, so only these rows can share an exact key: the exact
    comparison then reads the texts of these rows alone. Costs about 20 bytes a row on disk.
    """
    found = [_repeated_hashes(rows) for _, rows in buckets(hashed, ["h"], k, folder)]
    shutil.rmtree(folder, ignore_errors=True)
    return pl.concat(found) if found else pl.DataFrame(schema={"pos": pl.Int64})


def repeated_each(hashed: pl.LazyFrame, columns: Sequence[str], k: int, folder: Path) -> list[pl.DataFrame]:
    """`repeated` for each of several hash `columns` of `hashed` (with `pos`), in that order.

    Where the input fits one bucket (k == 1), the input is read once for all of them; larger inputs
    are partitioned once per hash, since rows equal on one hash need not be on another.
    """
    if k == 1:
        rows = hashed.collect()
        return [_repeated_hashes(rows.select("pos", pl.col(c).alias("h"))) for c in columns]
    found = [repeated(hashed.select("pos", pl.col(c).alias("h")), k, folder / c) for c in columns]
    shutil.rmtree(folder, ignore_errors=True)
    return found


def _repeated_hashes(rows: pl.DataFrame) -> pl.DataFrame:
    """The `pos` of rows whose `h` occurs more than once, in no particular order.

    The hash column alone is sorted, its repeated values read off neighbours, and the rows holding
    them picked with one hash-set lookup each: half the CPU of sorting the rows by hash, and a
    quarter of `is_duplicated`'s hash table (2M hashes, 2 cores, 2026-11-27: 0.07 s against 0.15 s
    and 0.21 s).
    """
    hashes = rows["h"].sort()
    repeated = hashes.filter(hashes == hashes.shift(1)).unique()
    return rows.filter(pl.col("h").is_in(repeated.implode())).select("pos")


def pair_hash(
    text_a: str, text_b: str, seed: int, *, symmetric: bool = True, prefix: str | None = None
) -> pl.Expr:
    """A 64-bit hash of a pair's texts (and a `prefix` column), equal for (a, b) and (b, a) if `symmetric`.

    It hashes each text and orders the two hashes, instead of ordering the texts themselves: no
    new string column is built, which made the hash pass over 2M pairs about three times cheaper.
    Only `repeated` reads it, so it may collide: the exact comparison decides.
    """
    a, b = pl.col(text_a).hash(seed), pl.col(text_b).hash(seed)
    if symmetric:
        a, b = pl.min_horizontal(a, b), pl.max_horizontal(a, b)
    keys = [a.alias("a"), b.alias("b")]
    return pl.struct([pl.col(prefix), *keys] if prefix else keys).hash(seed)


def scan(paths: Sequence[Path]) -> pl.LazyFrame:
    """A lazy scan over Parquet files (empty list: no rows), read in batches by the streaming engine."""
    return pl.scan_parquet(list(paths))
