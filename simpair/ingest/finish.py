"""After every file of a source is parsed: duplicates, extra-column types, and the version's files.

Reads the candidate parts the parse wrote, never all at once: duplicates come from `dedupe`
(out of core), extra columns are typed in two streaming passes (infer over every value of every
split, then cast), and each split's clean rows are written as row groups to `<split>.parquet`.
The quarantine (every rejected record, with its raw text) is written sorted into the order the
whole-file code wrote it in. Counts for the report come from these same passes.
"""

from __future__ import annotations

from collections import Counter, deque
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from simpair.contracts import Contract
from simpair.ingest import dedupe, extras, leakage
from simpair.ingest.background import BackgroundWrites
from simpair.ingest.batches import QUARANTINE_ORDER, QUARANTINE_PART_SCHEMA, split_index
from simpair.ingest.parse import FileResult
from simpair.schema import PAIR_SCHEMA, QUARANTINE_SCHEMA

# zstd as always; dictionaries only where a column repeats one value (texts gain nothing from them).
# Values go to the encoder 64k at a time, not pyarrow's default 1,024 (pages then close past 1 MB by
# up to one batch), and the long texts get no min/max statistics, which no reader filters on:
# together 14% less CPU for the writes (400k STS-B rows, 2026-11-26), same rows and schema.
_WRITE = {
    "compression": "zstd",
    "compression_level": 1,
    "use_dictionary": ["split", "dataset", "dataset_version", "source_file", "source_sha256"],
    "write_batch_size": 1 << 16,
}
_NO_STATISTICS = ("text_a", "text_b")
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
    options = {**_WRITE, "write_statistics": [n for n in schema.names if n not in _NO_STATISTICS]}
    writers = {spec.split: pq.ParquetWriter(out / f"{spec.split}.parquet", schema, **options)
               for spec in contract.files}  # fmt: skip
    clean: Counter[str] = Counter()
    quarantine_parts = [p for r in results for p in r.quarantine_parts]
    hashes: dict[str, list[pl.Series] | None] = {split: [] for split in writers}  # for `leakage`
    try:
        with ExitStack() as stack:  # row groups are encoded while the next part is read
            # one thread per split file: on two cores train's row groups are encoded beside dev's and test's
            writes = {split: stack.enter_context(BackgroundWrites()) for split in writers}
            version_id = meta["simpair.dataset_version"]
            sequence = _part_order([r.split for r in results for _ in r.parts])
            _write_clean(contract, parts, sequence, dups, updates, types, schema, writers, writes, clean,
                         quarantine_parts, work, version_id, sources, hashes)  # fmt: skip
    finally:
        for writer in writers.values():
            writer.close()
    for split, split_hashes in hashes.items():
        if split_hashes is not None:
            leakage.remember_hashes(out / f"{split}.parquet", split_hashes)
    quarantine = _write_quarantine(contract, quarantine_parts, out / "quarantine.parquet", meta)
    files = {f"{spec.split}.parquet": out / f"{spec.split}.parquet" for spec in contract.files}
    files["quarantine.parquet"] = out / "quarantine.parquet"
    clean_counts = {spec.split: clean[spec.split] for spec in contract.files}
    return Outputs(files, clean_counts, quarantine, types, found.conflicts)


def _part_order(splits: list[str | None]) -> list[int]:
    """The parts' numbers in the order `_write_clean` takes them: each split's parts in their own order,
    the splits interleaved in proportion to their parts, so every split file's writer has work at once.

    Each split file still gets its rows in line order. Parts whose rows may go to any split (a
    `split_column` source) keep their order.
    """
    if None in splits or len(set(splits)) < 2:
        return list(range(len(splits)))
    lanes: dict[str | None, deque[int]] = {}
    for number, split in enumerate(splits):
        lanes.setdefault(split, deque()).append(number)
    sizes = {split: len(lane) for split, lane in lanes.items()}
    order: list[int] = []
    while lanes:  # the split least far along (by share of its parts) goes next
        split = min(lanes, key=lambda s: ((sizes[s] - len(lanes[s])) / sizes[s], lanes[s][0]))
        order.append(lanes[split].popleft())
        if not lanes[split]:
            del lanes[split]
    return order


def _write_clean(
    contract: Contract,
    parts: list[Path],
    sequence: list[int],
    dups: dict[int, pl.DataFrame],
    updates: dict[int, pl.DataFrame],
    types: dict[str, str],
    schema: pa.Schema,
    writers: dict[str, pq.ParquetWriter],
    writes: dict[str, BackgroundWrites],
    clean: Counter[str],
    quarantine_parts: list[Path],
    work: Path,
    version: str,
    sources: dict[int, tuple[str, str]],
    hashes: dict[str, list[pl.Series] | None],
) -> None:
    """Each part's rows less its duplicates, extras typed, appended to its split's file as row groups.

    The leakage hashes of each split's rows are taken here too (`leakage.remember_hashes`), on this
    thread while the splits' threads encode: none for a split past what leakage keeps.
    """
    order = split_index(contract)
    dup_lines = {index: np.sort(rows["line"].to_numpy()) for index, rows in dups.items()}
    duplicates: list[pl.DataFrame] = []  # duplicates of every part, quarantined together at the end
    for number in sequence:
        frame = _with_source(pl.read_parquet(parts[number]), sources)
        mine = dups.get(int(frame["file_index"][0])) if frame.height else None
        rejects: list[pl.DataFrame] = []
        if mine is not None:  # a mask, not joins: only the few hits are copied
            is_dup = _among(frame["line"].to_numpy(), dup_lines[int(frame["file_index"][0])])
            if is_dup.any():
                duplicates.append(_owned(frame.filter(is_dup).join(mine, on="line", how="inner")))
                if sum(d.height for d in duplicates) >= _HELD_DUPLICATES:
                    _quarantine_duplicates(duplicates, order, work, number, quarantine_parts)
                frame = frame.filter(~is_dup)
        if frame.height and (new_scores := updates.get(int(frame["file_index"][0]))) is not None:
            frame = _with_mean_scores(frame, new_scores)
        typed = []
        bad = (
            pl.repeat(False, frame.height, eager=True)
            if contract.columns.extra
            else pl.Series([], dtype=pl.Boolean)
        )
        for position, spec in enumerate(contract.columns.extra):
            values, failed, kind = extras.type_extra(spec, frame[spec.name], types[spec.name])
            typed.append(values)
            new = failed & ~bad
            if new.any():  # rare: the detail quotes the value as Python's repr() does
                hits = frame.filter(new)
                said = [f"{spec.name} {v!r} is not {kind}" for v in hits[spec.name].to_list()]
                hits = hits.with_columns(pl.Series("_detail", said, dtype=pl.Utf8))
                rejects.append(
                    _quarantine_rows(hits, pl.lit("bad_extra"), pl.col("_detail"), 2, position, order)
                )
            bad = bad | failed
        if typed:
            frame = frame.with_columns(typed).filter(~bad)
        if rejects:
            path = work / f"quarantine-finish-{number:06d}.parquet"
            pl.concat(rejects).write_parquet(path)
            quarantine_parts.append(path)
        table = _clean_select(contract, frame, version)
        if table.height and (table["split"] == table["split"][0]).all():  # a file of one split: no copy
            groups: list[tuple[object, pl.DataFrame]] = [(table["split"][0], table)]
        else:
            groups = [(key, rows) for (key,), rows in table.group_by("split")]
        for split, rows in groups:  # the Arrow copy is made here, the encoding on the split's thread
            writes[str(split)].submit(writers[str(split)].write_table, rows.to_arrow().cast(schema))
            clean[str(split)] += rows.height
            kept = hashes[str(split)]
            if kept is not None and clean[str(split)] <= leakage.CACHE_ROWS:
                kept.append(rows.select(leakage.leakage_hash()).to_series())
            else:
                hashes[str(split)] = None
    _quarantine_duplicates(duplicates, order, work, len(parts), quarantine_parts)


def _quarantine_duplicates(
    duplicates: list[pl.DataFrame], order: dict[str, int], work: Path, number: int, parts: list[Path]
) -> None:
    """Write the duplicates held so far as one quarantine part (one write per many parts: fewer calls)."""
    if not duplicates:
        return
    path = work / f"quarantine-duplicates-{number:06d}.parquet"
    found = pl.concat(duplicates)
    _quarantine_rows(found, pl.col("reason"), pl.col("detail"), 1, 0, order).write_parquet(path)
    parts.append(path)
    duplicates.clear()


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
