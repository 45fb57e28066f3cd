"""After every file of a source is parsed: duplicates, extra-column types, and the version's files.

Reads the candidate parts the parse wrote, never all at once: duplicates come from `dedupe`
(out of core), extra columns are typed in two streaming passes (infer over every value of every
split, then cast), and each split's clean rows stream, part by part, into `<split>.parquet`
(`splitfile`: polars' encoder on every core).
The quarantine (every rejected record, with its raw text) is written sorted into the order the
whole-file code wrote it in. Counts for the report come from these same passes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from simpair.contracts import Contract
from simpair.ingest import dedupe, extras, leakage
from simpair.ingest.batches import QUARANTINE_ORDER, QUARANTINE_PART_SCHEMA, split_index
from simpair.ingest.parse import FileResult
from simpair.ingest.rows import shorten
from simpair.ingest.splitfile import polars_schema, write_split_file
from simpair.schema import PAIR_SCHEMA, QUARANTINE_SCHEMA

# Rows of each split whose texts are checked for wrapping quotes: a file's quoting is the same all
# through it, and the check then costs nothing measurable however large the split (7 ms at 2M rows).
QUOTE_CHECK_ROWS = 200_000
# Duplicate rows (with their raw lines) held before they are written to a quarantine part.
_HELD_DUPLICATES = 100_000


@dataclass
class Outputs:
    """The files of a new version (under the work folder) and what the report needs from them."""

    files: dict[str, Path]
    clean: dict[str, int]
    quarantine: pl.DataFrame  # source_file, source_line, reason, detail, split (no raw text)
    extra_types: dict[str, str] = field(default_factory=dict)
    conflicts: dict[str, int] = field(default_factory=dict)  # split -> pairs whose copies' labels differ
    # split -> (clean texts wrapped in the quote char, texts looked at: those of its first parts)
    quoted: dict[str, tuple[int, int]] = field(default_factory=dict)


def _by_file(frames: pl.DataFrame) -> dict[int, pl.DataFrame]:
    return {int(k[0]): g.drop("file_index") for k, g in frames.group_by("file_index")}  # type: ignore[index]


def _clean_select(contract: Contract, frame: pl.DataFrame, version: str) -> pl.DataFrame:
    clean = frame.select(
        "pair_id",
        "text_a",
        "text_b",
        "label",
        pl.col("score").cast(pl.Float32),
        "score_raw",
        "split",
        pl.lit(contract.dataset).alias("dataset"),
        pl.lit(version).alias("dataset_version"),
        "source_file",
        "source_sha256",
        pl.col("line").alias("source_line"),
        *(e.name for e in contract.columns.extra),
    )
    if contract.label.kind == "graded":
        clean = clean.with_columns(pl.lit(None, dtype=pl.Int8).alias("label"))
    return clean


def _infer_extras(contract: Contract, parts: list[Path], dups: dict[int, pl.DataFrame]) -> dict[str, str]:
    """Pass one: the type of each `auto` extra column over the kept rows of every split."""
    auto = [e for e in contract.columns.extra if e.type == "auto"]
    state = {e.name: extras.AutoType() for e in auto}
    for part in parts if auto else []:
        frame = _kept(pl.read_parquet(part, columns=["file_index", "line", *state]), dups)
        for name, typing in state.items():
            typing.update(frame[name])
    return {e.name: state[e.name].kind() if e.type == "auto" else e.type for e in contract.columns.extra}


def _kept(frame: pl.DataFrame, dups: dict[int, pl.DataFrame]) -> pl.DataFrame:
    if frame.height == 0:
        return frame
    mine = dups.get(int(frame["file_index"][0]))
    return frame if mine is None else frame.join(mine.select("line"), on="line", how="anti")


def write_outputs(
    contract: Contract, results: list[FileResult], version: str, work: Path, meta: dict[str, str]
) -> Outputs:
    """Dedupe, type extras, write every split's clean file and the quarantine under `work/out`."""
    results = sorted(results, key=lambda r: r.file_index)
    parts = [p for r in results for p in r.parts]
    sources = {r.file_index: (r.relative, r.sha256) for r in results}
    names = {index: name for index, (name, _) in sources.items()}
    found = dedupe.find_duplicates(parts, contract, work / "dedupe", sources=names)
    dup_files = found.rejects
    dup_frame = pl.concat([pl.read_parquet(p) for p in dup_files]) if dup_files else pl.DataFrame()
    dups = _by_file(dup_frame) if dup_frame.height else {}
    updates = _by_file(found.label_updates) if found.label_updates.height else {}
    types = _infer_extras(contract, parts, dups)
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    typed_schema = (
        pl.DataFrame(schema={name: extras.DTYPES[kind] for name, kind in types.items()}).to_arrow().schema
    )
    schema = pa.schema([*PAIR_SCHEMA, *typed_schema]).with_metadata(meta)
    quarantine_parts = [p for r in results for p in r.quarantine_parts]
    part_splits = [r.split for r in results for _ in r.parts]
    rows = _CleanRows(contract, parts, part_splits, dups, updates, types, schema, quarantine_parts, work,
                      meta["simpair.dataset_version"], sources)  # fmt: skip
    for spec in contract.files:  # one split at a time, each written on every core
        write_split_file(out / f"{spec.split}.parquet", partial(rows.of_split, spec.split), schema)
    rows.quarantine_held()
    for split, split_hashes in rows.hashes.items():
        if split_hashes is not None:
            leakage.remember_hashes(out / f"{split}.parquet", split_hashes)
    quarantine = _write_quarantine(contract, quarantine_parts, out / "quarantine.parquet", meta)
    files = {f"{spec.split}.parquet": out / f"{spec.split}.parquet" for spec in contract.files}
    files["quarantine.parquet"] = out / "quarantine.parquet"
    clean_counts = {spec.split: rows.clean[spec.split] for spec in contract.files}
    quoted = {
        spec.split: (rows.quoted[spec.split], rows.quote_checked[spec.split]) for spec in contract.files
    }
    return Outputs(files, clean_counts, quarantine, types, found.conflicts, quoted)


@dataclass
class _CleanRows:
    """Each part's rows less its duplicates, extras typed, served split by split to the split's file.

    What is taken out on the way (later copies of a pair, bad extra values) goes to quarantine parts.
    The leakage hashes of each split's rows are taken here too (`leakage.remember_hashes`): none for
    a split past what leakage keeps.
    """

    contract: Contract
    parts: list[Path]
    part_splits: list[str | None]  # each part's split; None: its rows may go to any split (split_column)
    dups: dict[int, pl.DataFrame]
    updates: dict[int, pl.DataFrame]
    types: dict[str, str]
    schema: pa.Schema
    quarantine_parts: list[Path]
    work: Path
    version: str
    sources: dict[int, tuple[str, str]]
    clean: Counter[str] = field(init=False, default_factory=Counter)  # rows written, per split
    quoted: Counter[str] = field(init=False, default_factory=Counter)  # texts wrapped in quotes, per split
    quote_checked: Counter[str] = field(init=False, default_factory=Counter)  # texts looked at, per split
    hashes: dict[str, list[pl.Series] | None] = field(init=False)  # leakage hashes, per split
    held: list[pl.DataFrame] = field(init=False, default_factory=list)  # duplicates not yet quarantined

    def __post_init__(self) -> None:
        self.order = split_index(self.contract)
        self.dup_lines = {index: np.sort(rows["line"].to_numpy()) for index, rows in self.dups.items()}
        self.columns = polars_schema(self.schema)
        self.hashes = {spec.split: [] for spec in self.contract.files}
        self.written = 0  # quarantine parts written here, for their names
        # reads each part still has coming: one by its split, or one by every split (split_column)
        self.reads_left = [1 if split is not None else len(self.contract.files) for split in self.part_splits]

    def of_split(self, split: str) -> Iterator[pl.DataFrame]:
        """The split's clean rows, part by part in line order (a split_column part is read per split).

        A part is deleted once read for the last time, so the work folder shrinks as the files grow
        and no large folder is left to remove at the end.
        """
        for number, (part, part_split) in enumerate(zip(self.parts, self.part_splits, strict=True)):
            if part_split is not None and part_split != split:
                continue
            frame = _with_source(pl.read_parquet(part), self.sources)
            self.reads_left[number] -= 1
            if not self.reads_left[number]:
                part.unlink()
            if part_split is None:
                frame = frame.filter(pl.col("split") == split)
            table = self._clean(frame)
            self.clean[split] += table.height
            if table.height and self.quote_checked[split] < 2 * QUOTE_CHECK_ROWS:
                self.quoted[split] += table.select(_quoted_texts(self.contract.format.quotechar)).item()
                self.quote_checked[split] += 2 * table.height
            kept = self.hashes[split]
            if kept is not None and self.clean[split] <= leakage.CACHE_ROWS:
                kept.append(table.select(leakage.leakage_hash()).to_series())
            else:
                self.hashes[split] = None
            if table.height:
                yield table.cast(self.columns)  # type: ignore[arg-type]

    def _clean(self, frame: pl.DataFrame) -> pl.DataFrame:
        """A part's rows less duplicates and bad extras, with mean scores where the rule gives them."""
        contract = self.contract
        index = int(frame["file_index"][0]) if frame.height else -1
        mine = self.dups.get(index)
        if mine is not None:  # a mask, not joins: only the few hits are copied
            is_dup = _among(frame["line"].to_numpy(), self.dup_lines[index])
            if is_dup.any():
                self.held.append(_owned(frame.filter(is_dup).join(mine, on="line", how="inner")))
                if sum(d.height for d in self.held) >= _HELD_DUPLICATES:
                    self.quarantine_held()
                frame = frame.filter(~is_dup)
        if frame.height and (new_scores := self.updates.get(index)) is not None:
            frame = _with_mean_scores(frame, new_scores)
        typed = []
        rejects: list[pl.DataFrame] = []
        bad = (
            pl.repeat(False, frame.height, eager=True)
            if contract.columns.extra
            else pl.Series([], dtype=pl.Boolean)
        )
        for position, spec in enumerate(contract.columns.extra):
            values, failed, kind = extras.type_extra(spec, frame[spec.name], self.types[spec.name])
            typed.append(values)
            new = failed & ~bad
            if new.any():  # rare: the detail quotes the value as Python's repr() does
                hits = frame.filter(new)
                said = [f"{spec.name} {_quoted(v)} is not {kind}" for v in hits[spec.name].to_list()]
                hits = hits.with_columns(pl.Series("_detail", said, dtype=pl.Utf8))
                rejects.append(
                    _quarantine_rows(hits, pl.lit("bad_extra"), pl.col("_detail"), 2, position, self.order)
                )
            bad = bad | failed
        if typed:
            frame = frame.with_columns(typed).filter(~bad)
        if rejects:
            self._quarantine(pl.concat(rejects), "finish")
        return _clean_select(contract, frame, self.version)

    def quarantine_held(self) -> None:
        """Write the duplicates held so far as one quarantine part (one write per many parts)."""
        if self.held:
            found = pl.concat(self.held)
            self._quarantine(_quarantine_rows(found, pl.col("reason"), pl.col("detail"), 1, 0, self.order),
                             "duplicates")  # fmt: skip
            self.held.clear()

    def _quarantine(self, rows: pl.DataFrame, kind: str) -> None:
        self.written += 1
        path = self.work / f"quarantine-{kind}-{self.written:06d}.parquet"
        rows.write_parquet(path)
        self.quarantine_parts.append(path)


def _quoted_texts(quote: str) -> pl.Expr:
    """How many of the rows' texts start and end with `quote`: their field quoting was not undone.

    One vectorised pass over texts already in memory: a byte compare per text, a second only for the
    few that start with the quote. `dataset` warns when the share is high, since a CSV-quoted file read
    with `quoting: none` keeps its quotes.
    """
    counts = []
    for name in ("text_a", "text_b"):
        opened = pl.col(name).filter(pl.col(name).str.starts_with(quote))
        counts.append((opened.str.ends_with(quote) & (opened.str.len_bytes() > len(quote.encode()))).sum())
    return pl.sum_horizontal(counts)


def _with_source(frame: pl.DataFrame, sources: dict[int, tuple[str, str]]) -> pl.DataFrame:
    """A part with its file's source_file and source_sha256, constant per file so not stored in it.

    Writing and reading those two columns cost about a fifth of a part's write (2M rows, 2026-11-26).
    """
    if "source_file" in frame.columns:
        return frame
    name, sha256 = sources[int(frame["file_index"][0])] if frame.height else ("", "")
    return frame.with_columns(pl.lit(name).alias("source_file"), pl.lit(sha256).alias("source_sha256"))


def _owned(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows with their strings copied out: a filtered string view keeps its whole part's buffers."""
    return pl.from_arrow(frame.to_arrow(compat_level=pl.CompatLevel.oldest()))  # type: ignore[return-value]


def _among(lines: np.ndarray, sorted_lines: np.ndarray) -> pl.Series:
    """Whether each line is one of `sorted_lines` (a binary search each: cheaper than a hash set per part)."""
    at = np.searchsorted(sorted_lines, lines).clip(max=max(len(sorted_lines) - 1, 0))
    return pl.Series(sorted_lines[at] == lines if len(sorted_lines) else np.zeros(len(lines), dtype=bool))


def _with_mean_scores(frame: pl.DataFrame, scores: pl.DataFrame) -> pl.DataFrame:
    """The kept first copies of conflicting pairs take their copies' mean score (`mean` rule)."""
    joined = frame.join(scores, on="line", how="left", suffix="_mean")
    return joined.with_columns(
        pl.coalesce("score_mean", "score").alias("score"),
        pl.coalesce("score_raw_mean", "score_raw").alias("score_raw"),
    ).drop("score_mean", "score_raw_mean")


def _quarantine_rows(
    frame: pl.DataFrame, reason: pl.Expr, detail: pl.Expr, phase: int, extra: int, order: dict[str, int]
) -> pl.DataFrame:
    where = pl.format("{}:{}: ", pl.col("source_file"), pl.col("line"))
    return frame.select(
        "source_file",
        pl.col("line").alias("source_line"),
        pl.col("raw").alias("raw_line"),
        reason.alias("reason"),
        pl.concat_str([where, detail]).alias("detail"),
        "split",
        pl.lit(phase, dtype=pl.Int8).alias("_phase"),
        pl.lit(extra, dtype=pl.Int32).alias("_extra"),
        pl.col("split").replace_strict(order, default=-1, return_dtype=pl.Int32).alias("_split"),
        pl.col("file_index").cast(pl.Int32),
    ).cast(QUARANTINE_PART_SCHEMA)  # type: ignore[arg-type]


def _write_quarantine(
    contract: Contract, parts: list[Path], path: Path, meta: dict[str, str]
) -> pl.DataFrame:
    """The quarantine file in today's row order; returns its rows without the raw text, for the report."""
    frame = (
        pl.scan_parquet(parts).sort(QUARANTINE_ORDER).collect(engine="streaming")
        if parts
        else pl.DataFrame(schema=QUARANTINE_PART_SCHEMA)
    )
    table = frame.select(
        "source_file",
        "source_line",
        "raw_line",
        "reason",
        "detail",
        "split",
        pl.lit(contract.dataset).alias("dataset"),
        pl.lit(meta["simpair.dataset_version"]).alias("dataset_version"),
    ).to_arrow()
    pq.write_table(table.cast(QUARANTINE_SCHEMA).replace_schema_metadata(meta), path, compression="zstd")
    return frame.select("source_file", "source_line", "reason", "detail", "split")


def _quoted(value: object) -> str:
    """A value as a quarantine detail quotes it: repr() of the text, shortened to 40 characters."""
    return repr(shorten(value)) if isinstance(value, str) else repr(value)
