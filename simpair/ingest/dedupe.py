"""Exact-duplicate and pair-id rejection over candidate rows of any size, out of core.

The rules are those of one in-order pass over each split, keeping the first copy: a later copy of a
pair is a `duplicate` (with `checks.symmetric_pairs`, (a, b) and (b, a) are one pair); then, among
rows that are not duplicates, a later row with an already seen pair id is a `duplicate_pair_id`.
"First" is the lowest (file_index, line).

Dictionaries of keys grow with the dataset, so instead each rule runs in two passes over the
candidate parts, both through `simpair.ingest.spill`:
1. a 64-bit hash of every row's key, hash-partitioned on disk (about 20 bytes a row): a key whose
   hash is unique in its bucket occurs once, so only rows with a repeated hash are candidates;
2. the exact texts of the candidates only (usually a few percent of the rows), partitioned again,
   where one window expression finds the first copy of every exact key.
The hash only ever rules rows out; every rejection is decided on the exact texts.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from simpair.contracts import Contract
from simpair.ingest import spill
from simpair.pairs import sorted_texts

REJECT_SCHEMA = {"file_index": pl.Int32, "line": pl.Int64, "reason": pl.Utf8, "detail": pl.Utf8}
# A hash row is ~20 bytes against ~250 for a row of texts, so hash buckets hold this many times more.
HASH_ROWS_FACTOR = 8
_LINE = 1 << 40  # (file_index, line) packed in one Int64 that sorts like the pair: lines < 2**40
_PAIR_KEY = ["split", "lo", "hi"]
_ID_KEY = ["split", "pair_id"]
_PLAIN_ID = r"^[ -&(-\[\]-~]*$"  # printable ASCII without ' or \: repr() only adds quotes
_NO_ROWS = pl.DataFrame(schema={"pos": pl.Int64})


def _position() -> pl.Expr:
    return (pl.col("file_index").cast(pl.Int64) * _LINE + pl.col("line")).alias("pos")


def _pair_columns(contract: Contract) -> list[pl.Expr]:
    """split, lo, hi (the exact pair key) and whether the row holds its texts in (hi, lo) order."""
    if contract.checks.symmetric_pairs:
        lo, hi = sorted_texts("text_a", "text_b")
        swapped = pl.col("text_a") > pl.col("text_b")
    else:  # ordered pairs: the key is (text_a, text_b) as written
        lo, hi, swapped = pl.col("text_a").alias("lo"), pl.col("text_b").alias("hi"), pl.lit(False)
    return [pl.col("split"), lo, hi, swapped.alias("swapped")]


def _later_copies(rows: pl.DataFrame, key: list[str], *carry: str) -> pl.DataFrame:
    """Rows that are not the first (lowest pos) of their exact key, with the first's pos and `carry`."""
    firsts = [pl.col(c).first().over(key).alias(f"first_{c}") for c in ("pos", *carry)]
    rows = rows.sort("pos").with_columns(firsts)
    return rows.filter(pl.col("pos") != pl.col("first_pos"))


def _exact(
    scan: pl.LazyFrame, columns: list[pl.Expr], cand: pl.DataFrame, key: list[str], bucket_rows: int,
    folder: Path, *carry: str,
) -> Iterator[pl.DataFrame]:  # fmt: skip
    """Later copies among the candidate rows, bucket by bucket."""
    query = scan.filter(_position().is_in(cand["pos"].implode())).select(_position(), *columns)
    k = spill.bucket_count(cand.height, bucket_rows)
    for _, rows in spill.buckets(query, key, k, folder):
        yield _later_copies(rows, key, *carry)
    shutil.rmtree(folder, ignore_errors=True)


def _where(sources: dict[int, str]) -> pl.Expr:
    """Where the first copy is: `line N` in the row's own file, else `<source_file>:<line>`."""
    own = (pl.col("pos") // _LINE).cast(pl.Int32).replace_strict(sources, return_dtype=pl.Utf8)
    first = (pl.col("first_pos") // _LINE).cast(pl.Int32).replace_strict(sources, return_dtype=pl.Utf8)
    line = (pl.col("first_pos") % _LINE).cast(pl.Utf8)
    return pl.when(own == first).then(pl.format("line {}", line)).otherwise(pl.format("{}:{}", first, line))


def _quoted(ids: pl.Series) -> pl.Series:
    """Python's repr() of each id, vectorised for the ids where it only adds single quotes."""
    plain = ids.str.contains(_PLAIN_ID)
    quoted = ids.to_frame("id").select(pl.format("'{}'", "id")).to_series()
    odd = {v: repr(v) for v in ids.filter(~plain).unique().to_list()}
    return (
        quoted if not odd else pl.select(pl.when(plain).then(quoted).otherwise(ids.replace(odd))).to_series()
    )


def _rejects(frame: pl.DataFrame, reason: str, detail: pl.Expr) -> pl.DataFrame:
    return frame.select(
        (pl.col("pos") // _LINE).cast(pl.Int32).alias("file_index"),
        (pl.col("pos") % _LINE).alias("line"),
        pl.lit(reason).alias("reason"),
        detail.alias("detail"),
    )


def _source_files(scan: pl.LazyFrame) -> dict[int, str]:
    pairs = scan.select("file_index", "source_file").unique().collect(engine="streaming")
    if pairs["file_index"].n_unique() != pairs.height:
        raise ValueError("candidate parts give one file_index several source_file names")
    return dict(zip(pairs["file_index"].to_list(), pairs["source_file"].to_list(), strict=True))


def duplicate_rejects(
    parts: list[Path], contract: Contract, work: Path, bucket_rows: int = spill.BUCKET_ROWS
) -> list[Path]:
    """Parquet files under `work` (file_index, line, reason, detail) of every candidate row to quarantine.

    `parts` are candidate rows that passed the row checks, in any order and any number of files;
    `bucket_rows` bounds the rows of texts held at once (tests make it tiny to exercise many buckets).
    """
    work.mkdir(parents=True, exist_ok=True)
    checks = contract.checks
    parts = [p for p in parts if spill.row_count([p])]
    scan = spill.scan(parts)
    k = spill.bucket_count(spill.row_count(parts), bucket_rows * HASH_ROWS_FACTOR)
    out: list[Path] = []
    sources: dict[int, str] = {}

    def emit(name: str, frame: pl.DataFrame, reason: str, detail: str) -> None:
        """Write rejects; `detail` is a pl.format template whose last {} is the first copy's place."""
        if not sources:
            sources.update(_source_files(scan))
        fields = [pl.col(c) for c in ("how", "quoted") if c in frame.columns]
        out.append(work / f"duplicates-{name}.parquet")
        _rejects(frame, reason, pl.format(detail, *fields, _where(sources))).write_parquet(out[-1])

    removed = [_NO_ROWS]
    if parts and checks.drop_exact_duplicates:
        columns = _pair_columns(contract)
        cand = spill.repeated(
            scan.select(_position(), pl.struct(columns[:3]).hash(11).alias("h")), k, work / "ph"
        )
        for number, dups in enumerate(
            _exact(scan, columns, cand, _PAIR_KEY, bucket_rows, work / "p", "swapped")
        ):
            same = pl.col("swapped") == pl.col("first_swapped")
            how = pl.when(same).then(pl.lit("same text_a/text_b")).otherwise(pl.lit("same texts, swapped,"))
            if dups.height:
                emit(f"pairs-{number}", dups.with_columns(how.alias("how")), "duplicate", "{} as {}")
                removed.append(dups.select("pos"))
    if parts and checks.unique_pair_ids:
        kept = scan.select(_position(), *_ID_KEY).join(pl.concat(removed).lazy(), on="pos", how="anti")
        cand = spill.repeated(kept.select("pos", pl.struct(_ID_KEY).hash(13).alias("h")), k, work / "ih")
        id_columns = [pl.col(c) for c in _ID_KEY]
        for number, dups in enumerate(_exact(scan, id_columns, cand, _ID_KEY, bucket_rows, work / "i")):
            if dups.height:
                quoted = dups.with_columns(_quoted(dups["pair_id"]).alias("quoted"))
                emit(f"ids-{number}", quoted, "duplicate_pair_id", "pair_id {} already on {}")
    if not out:
        out.append(work / "duplicates-none.parquet")
        pl.DataFrame(schema=REJECT_SCHEMA).write_parquet(out[-1])
    return out
