"""Streaming reads of one batch and row-level validation against the scoring contract.

A batch is processed as fixed chunks of `chunk_rows` rows: chunk i is rows [i*chunk_rows,
(i+1)*chunk_rows) of the file, whatever its row groups are, so a resumed run cuts the file exactly
where the crashed run did. A chunk is read from only the row groups that overlap it, in record
batches, so memory is bounded by the chunk and one row group's pages, never the file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from simpair.scoring.contract import ScoringContract
from simpair.scoring.inbox import open_batch

TEXT_COLUMNS = ("text_a", "text_b")
READ_BATCH_ROWS = 8192


class FileProblem(Exception):
    """A file-level problem: the whole batch is quarantined with `reason` (a short code) and `detail`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class FileLayout:
    """What the footer says: row count, where each row group starts, the Arrow schema."""

    n_rows: int
    row_group_starts: tuple[int, ...]
    schema: pa.Schema


def inspect_file(url: str, contract: ScoringContract) -> FileLayout:
    """Read only the footer and decide whether the file can be scored at all.

    Raises FileProblem for a non-Parquet or corrupt footer ('unreadable'), a schema the contract
    rejects ('schema'), or a file with no rows ('empty').
    """
    try:
        with open_batch(url) as handle:
            meta = pq.ParquetFile(handle).metadata
            schema = meta.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError/... for anything not Parquet
        raise FileProblem("unreadable", f"not a readable Parquet file: {type(exc).__name__}: {exc}") from exc
    problem = contract.schema_problem(schema)
    if problem:
        raise FileProblem("schema", problem)
    if meta.num_rows == 0:
        raise FileProblem("empty", "the file has zero rows")
    starts, total = [], 0
    for index in range(meta.num_row_groups):
        starts.append(total)
        total += meta.row_group(index).num_rows
    return FileLayout(n_rows=meta.num_rows, row_group_starts=tuple(starts), schema=schema)


def read_chunk(url: str, layout: FileLayout, start: int, stop: int) -> pa.Table:
    """Rows [start, stop) of the file, streamed from the row groups that overlap them."""
    bounds = [*layout.row_group_starts, layout.n_rows]
    groups = [g for g in range(len(layout.row_group_starts)) if bounds[g] < stop and bounds[g + 1] > start]
    pieces: list[pa.RecordBatch] = []
    try:
        with open_batch(url) as handle:
            reader = pq.ParquetFile(handle)
            position = bounds[groups[0]] if groups else start
            for batch in reader.iter_batches(batch_size=READ_BATCH_ROWS, row_groups=groups):
                lo, hi = max(start - position, 0), min(stop - position, batch.num_rows)
                if hi > lo:
                    pieces.append(batch.slice(lo, hi - lo))
                position += batch.num_rows
                if position >= stop:
                    break
    except Exception as exc:
        raise FileProblem("corrupt", f"rows {start}-{stop}: {type(exc).__name__}: {exc}") from exc
    table = pa.Table.from_batches(pieces, schema=layout.schema) if pieces else layout.schema.empty_table()
    if table.num_rows != stop - start:
        raise FileProblem("corrupt", f"rows {start}-{stop}: read {table.num_rows} rows, footer promised more")
    return table


@dataclass
class ValidatedChunk:
    """A chunk split into what can be scored and what is rejected.

    `kept` holds the input rows that pass, every column untouched; `text_a`/`text_b` are their
    decoded texts, cut to the contract's max_chars (`cut` flags which pairs were cut); `rejects`
    lists (row_index, reason, field, value_a, value_b, pair_id) for the others.
    """

    kept: pa.Table
    text_a: list[str]
    text_b: list[str]
    cut: np.ndarray
    rejects: list[tuple[int, str, str, str | None, str | None, str | None]]


def _decode_column(column: pa.ChunkedArray) -> list[object]:
    """Python values of a text column: str for valid text, bytes for invalid UTF-8, None for null."""
    array = column.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        try:
            array.validate(full=True)
            return array.to_pylist()
        except pa.ArrowInvalid:  # a writer put invalid UTF-8 in a string column: find the rows
            array = array.cast(pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary())
    values: list[object] = []
    for raw in array.to_pylist():
        if raw is None:
            values.append(None)
            continue
        try:
            values.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            values.append(raw)
    return values


def _show(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return str(value)


def validate_rows(table: pa.Table, contract: ScoringContract, start: int) -> ValidatedChunk:
    """Apply the contract's row checks; `start` is the file row index of the chunk's first row."""
    rules = contract.rows
    decoded = {name: _decode_column(table.column(name)) for name in TEXT_COLUMNS}
    pair_ids = table.column("pair_id").to_pylist() if "pair_id" in table.column_names else None
    keep = np.ones(table.num_rows, dtype=bool)
    cut = np.zeros(table.num_rows, dtype=bool)
    text_a: list[str] = []
    text_b: list[str] = []
    rejects = []
    for row, (a, b) in enumerate(zip(decoded["text_a"], decoded["text_b"], strict=True)):
        problem = None
        for field, value in (("text_a", a), ("text_b", b)):
            if value is None and rules.reject_null:
                problem = ("null_text", field)
            elif isinstance(value, bytes) and rules.reject_non_utf8:
                problem = ("non_utf8", field)
            elif isinstance(value, str) and rules.reject_blank and not value.strip():
                problem = ("blank_text", field)
            if problem:
                break
        if problem:
            keep[row] = False
            pid = None if pair_ids is None else _show(pair_ids[row])
            rejects.append((start + row, problem[0], problem[1], _show(a), _show(b), pid))
            continue
        a, b = str(a or ""), str(b or "")
        if len(a) > rules.max_chars or len(b) > rules.max_chars:
            cut[row] = True
            a, b = a[: rules.max_chars], b[: rules.max_chars]
        text_a.append(a)
        text_b.append(b)
    kept = table if keep.all() else table.filter(pa.array(keep))
    return ValidatedChunk(kept=kept, text_a=text_a, text_b=text_b, cut=cut[keep], rejects=rejects)
