"""Exact-duplicate and pair-id rejection over candidate rows of any size, out of core.

The rules are those of one in-order pass over each split, keeping the first copy: a later copy of a
pair is a `duplicate` (with `checks.symmetric_pairs`, (a, b) and (b, a) are one pair); then, among
rows that are not duplicates, a later row with an already seen pair id is a `duplicate_pair_id`.
"First" is the lowest (file_index, line). Copies of a pair whose labels differ follow the contract's
`duplicates.conflicting_labels`: all quarantined as `conflicting_duplicate` (default), the first kept
as it is, or the first kept with the copies' mean score; the comparison runs inside the same buckets.

Dictionaries of keys grow with the dataset, so instead each rule runs in two passes over the
candidate parts, both through `simpair.ingest.spill`:
1. a 64-bit hash of every row's key, hash-partitioned on disk (about 20 bytes a row): a key whose
   hash is unique in its bucket occurs once, so only rows with a repeated hash are candidates (both
   rules' hashes come from one read of the parts while they fit one bucket);
2. the exact texts of the candidates only (usually a few percent of the rows), partitioned again,
   where one window expression finds the first copy of every exact key.
The hash only ever rules rows out; every rejection is decided on the exact texts.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
_UPDATE_COLUMNS = ["pos", "mean_score", "mean_score_raw"]
_UPDATE_SCHEMA = {"pos": pl.Int64, "mean_score": pl.Float64, "mean_score_raw": pl.Float64}
_NO_UPDATES = pl.DataFrame(schema=_UPDATE_SCHEMA)


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


def _pair_hash(contract: Contract) -> pl.Expr:
    """A hash of `_pair_columns`' exact key (split, lo, hi), built without ordering the texts."""
    symmetric = contract.checks.symmetric_pairs
    return spill.pair_hash("text_a", "text_b", 11, symmetric=symmetric, prefix="split")


def _label_columns(contract: Contract) -> list[pl.Expr]:
    """The label copies of a pair are compared on (`lab`, and as text for details); scores for `mean`."""
    label = pl.col("label") if contract.label.kind == "binary" else pl.col("score_raw")
    columns = [label.cast(pl.Float64).alias("lab"), label.cast(pl.Utf8).alias("lab_text")]
    if contract.duplicates.conflicting_labels == "mean":
        columns += [pl.col("score"), pl.col("score_raw")]
    return columns


def _with_firsts(rows: pl.DataFrame, key: list[str], *carry: str) -> pl.DataFrame:
    """Rows of a bucket with the first (lowest pos) row of their exact key: its pos and `carry`."""
    firsts = [pl.col(c).first().over(key).alias(f"first_{c}") for c in ("pos", *carry)]
    return rows.sort("pos").with_columns(firsts)


def _later_copies(rows: pl.DataFrame, key: list[str], *carry: str) -> pl.DataFrame:
    """Rows that are not the first (lowest pos) of their exact key, with the first's pos and `carry`."""
    rows = _with_firsts(rows, key, *carry)
    return rows.filter(pl.col("pos") != pl.col("first_pos"))


def _exact(
    scan: pl.LazyFrame, columns: list[pl.Expr], cand: pl.DataFrame, key: list[str], bucket_rows: int,
    folder: Path,
) -> Iterator[pl.DataFrame]:  # fmt: skip
    """The candidate rows with their exact key columns, bucket by bucket (equal keys share a bucket)."""
    if cand.height == 0:  # no hash repeats: nothing to compare, and no need to read the parts again
        return
    query = scan.filter(_position().is_in(cand["pos"].implode())).select(_position(), *columns)
    k = spill.bucket_count(cand.height, bucket_rows)
    for _, rows in spill.buckets(query, key, k, folder):
        yield rows
    shutil.rmtree(folder, ignore_errors=True)


@dataclass
class _PairCopies:
    """One bucket's copies of pairs, sorted out by `duplicates.conflicting_labels`."""

    plain: pl.DataFrame  # later copies to quarantine as `duplicate` (with `how`, maybe a label note)
    conflicting: pl.DataFrame  # every copy of a conflicting pair, to quarantine as `conflicting_duplicate`
    updates: pl.DataFrame  # first copies whose score becomes the copies' mean (rule `mean`)
    counts: pl.DataFrame  # split, conflicting pairs, their rows


def _pair_copies(rows: pl.DataFrame, rule: str) -> _PairCopies:
    rows = _with_firsts(rows, _PAIR_KEY, "swapped", "lab_text")
    means = [pl.col(c).mean().alias(f"mean_{c}") for c in ("score", "score_raw") if c in rows.columns]
    groups = rows.group_by(_PAIR_KEY).agg(
        (pl.col("lab").n_unique() > 1).alias("conflict"),
        pl.len().alias("copies"),
        pl.col("lab_text").sort_by("lab").unique(maintain_order=True).str.join(", ").alias("labels"),
        *means,
    )
    rows = rows.join(groups, on=_PAIR_KEY, how="left")
    same = pl.col("swapped") == pl.col("first_swapped")
    how = pl.when(same).then(pl.lit("same text_a/text_b")).otherwise(pl.lit("same texts, swapped,"))
    later = pl.col("pos") != pl.col("first_pos")
    conflicting = rows.filter("conflict")
    if rule == "quarantine":
        plain = rows.filter(later & ~pl.col("conflict")).with_columns(
            how.alias("how"), pl.lit("").alias("note")
        )
        kept_conflicts = conflicting.clear()
    else:
        kept = "first copy kept" if rule == "keep_first" else "the first copy gets the mean score"
        note = pl.format(
            f"; its label {{}} differs from the first copy's {{}} ({kept})", "lab_text", "first_lab_text"
        )
        note = pl.when(pl.col("conflict")).then(note).otherwise(pl.lit(""))
        plain = rows.filter(later).with_columns(how.alias("how"), note.alias("note"))
        kept_conflicts, conflicting = conflicting, conflicting.clear()
    updates = kept_conflicts.filter(~later).select(_UPDATE_COLUMNS) if rule == "mean" else _NO_UPDATES
    counted = pl.concat([conflicting, kept_conflicts])
    counts = counted.group_by("split").agg(
        pl.struct("lo", "hi").n_unique().alias("pairs"), pl.len().alias("rows")
    )
    return _PairCopies(plain, conflicting, updates, counts)


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


@dataclass
class Duplicates:
    """What the duplicate rules decided over all candidate rows of a source."""

    rejects: list[Path]  # Parquet files (file_index, line, reason, detail) of the rows to quarantine
    label_updates: pl.DataFrame  # file_index, line, score, score_raw: kept first copies, new mean score
    conflicts: dict[str, int] = field(default_factory=dict)  # split -> pairs whose copies' labels differ


def find_duplicates(
    parts: list[Path],
    contract: Contract,
    work: Path,
    bucket_rows: int = spill.BUCKET_ROWS,
    sources: dict[int, str] | None = None,
) -> Duplicates:
    """Every candidate row to quarantine as a duplicate, and the copies whose labels conflict.

    `parts` are candidate rows that passed the row checks, in any order and any number of files;
    `bucket_rows` bounds the rows of texts held at once (tests make it tiny to exercise many buckets).
    `sources` names the file of each file_index; without it the parts' source_file column does.
    """
    work.mkdir(parents=True, exist_ok=True)
    checks = contract.checks
    parts = [p for p in parts if spill.row_count([p])]
    scan = spill.scan(parts)
    k = spill.bucket_count(spill.row_count(parts), bucket_rows * HASH_ROWS_FACTOR)
    out: list[Path] = []
    sources = dict(sources or {})

    def emit(name: str, frame: pl.DataFrame, reason: str, detail: Callable[[pl.Expr], pl.Expr]) -> None:
        """Write rejects; `detail` builds the text from the first copy's place."""
        if not sources:
            sources.update(_source_files(scan))
        out.append(work / f"duplicates-{name}.parquet")
        _rejects(frame, reason, detail(_where(sources))).write_parquet(out[-1])

    removed = [_NO_ROWS]
    updates: list[pl.DataFrame] = []
    counts: list[pl.DataFrame] = []
    # Both rules' hashes come from one read of the parts. The pair-id candidates are found over every
    # row and the duplicate pairs dropped afterwards: a hash repeated only with a dropped row leaves
    # its row alone in its exact key, so the rule decides as it would over the kept rows alone.
    hashes = {
        name: expr
        for name, expr, on in (
            ("pair_hash", _pair_hash(contract), checks.drop_exact_duplicates),
            ("id_hash", pl.struct(_ID_KEY).hash(13), checks.unique_pair_ids),
        )
        if on and parts
    }
    hashed = scan.select(_position(), *(expr.alias(name) for name, expr in hashes.items()))
    found = spill.repeated_each(hashed, list(hashes), k, work / "h") if hashes else []
    repeated = dict(zip(hashes, found, strict=True))
    if "pair_hash" in repeated:
        columns = [*_pair_columns(contract), *_label_columns(contract)]
        cand = repeated["pair_hash"]
        rule = contract.duplicates.conflicting_labels
        for number, rows in enumerate(_exact(scan, columns, cand, _PAIR_KEY, bucket_rows, work / "p")):
            copies = _pair_copies(rows, rule)
            if copies.plain.height:
                emit(f"pairs-{number}", copies.plain, "duplicate",
                     lambda where: pl.format("{} as {}{}", "how", where, "note"))  # fmt: skip
            if copies.conflicting.height:
                emit(f"conflicts-{number}", copies.conflicting, "conflicting_duplicate", _conflict_detail)
            removed += [copies.plain.select("pos"), copies.conflicting.select("pos")]
            updates.append(copies.updates)
            counts.append(copies.counts)
    if "id_hash" in repeated:
        cand = repeated["id_hash"].join(pl.concat(removed), on="pos", how="anti")
        id_columns = [pl.col(c) for c in _ID_KEY]
        for number, rows in enumerate(_exact(scan, id_columns, cand, _ID_KEY, bucket_rows, work / "i")):
            dups = _later_copies(rows, _ID_KEY)
            if dups.height:
                quoted = dups.with_columns(_quoted(dups["pair_id"]).alias("quoted"))
                emit(f"ids-{number}", quoted, "duplicate_pair_id",
                     lambda where: pl.format("pair_id {} already on {}", "quoted", where))  # fmt: skip
    if not out:
        out.append(work / "duplicates-none.parquet")
        pl.DataFrame(schema=REJECT_SCHEMA).write_parquet(out[-1])
    return Duplicates(out, _label_updates(updates), _conflict_counts(counts))


def _conflict_detail(where: pl.Expr) -> pl.Expr:
    return pl.format("{} copies of this pair carry different labels ({}); first copy at {}",
                     "copies", "labels", where)  # fmt: skip


def _label_updates(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """file_index, line, score, score_raw of the first copies that take their copies' mean."""
    found = pl.concat(frames) if frames else pl.DataFrame(schema=_UPDATE_SCHEMA)
    return found.select(
        (pl.col("pos") // _LINE).cast(pl.Int32).alias("file_index"),
        (pl.col("pos") % _LINE).alias("line"),
        pl.col("mean_score").alias("score"),
        pl.col("mean_score_raw").alias("score_raw"),
    )


def _conflict_counts(frames: list[pl.DataFrame]) -> dict[str, int]:
    """Pairs whose copies carry different labels, per split (a pair lives in one bucket: counts add up)."""
    found = [f for f in frames if f.height]
    if not found:
        return {}
    total = pl.concat(found).group_by("split").agg(pl.col("pairs").sum())
    return {str(split): int(pairs) for split, pairs in total.iter_rows()}


def duplicate_rejects(
    parts: list[Path], contract: Contract, work: Path, bucket_rows: int = spill.BUCKET_ROWS
) -> list[Path]:
    """The reject files of `find_duplicates` alone."""
    return find_duplicates(parts, contract, work, bucket_rows).rejects
