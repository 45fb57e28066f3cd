"""A decoded sample as columns, for each kind of file: delimited text, JSON Lines or Parquet.

Delimited samples also give the `format:` section (delimiter, quoting, header, field counts), and the
notes on records that ingest will quarantine for their shape (another field count, blank lines).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from simpair.ingest.infer.columns import Column, table_of_records
from simpair.ingest.infer.dialect import Parse, choose_layout, looks_like_header
from simpair.ingest.infer.errors import InferError
from simpair.ingest.infer.sample import first_records


def _json_object(line: str) -> dict[str, Any] | None:
    """The line's JSON object; None for a line that is not JSON or not an object."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def jsonl_rows(lines: list[str], limit: int, shown: str) -> tuple[list[dict[str, Any]], list[int]]:
    """The first `limit` JSON objects and their 1-based lines; refused when most lines are not objects."""
    rows, numbers, _, broken = first_records(lines, limit, _json_object)
    if broken > len(rows):
        raise InferError(f"{shown}: {broken} of the first {broken + len(rows)} lines are not JSON objects")
    if not rows:
        raise InferError(f"{shown}: no JSON object lines found")
    return rows, numbers


def parquet_rows(data: bytes, limit: int, shown: str) -> list[dict[str, Any]]:
    """The rows of the first record batch of at most `limit` rows."""
    try:
        batches = pq.ParquetFile(pa.BufferReader(data)).iter_batches(batch_size=limit)
        first = next(batches, None)
    except (pa.ArrowException, OSError) as exc:
        raise InferError(f"{shown}: not a readable Parquet file: {exc}") from exc
    rows = [] if first is None else first.to_pylist()
    if not rows:
        raise InferError(f"{shown}: Parquet file has no rows")
    return rows


def delimited_table(
    lines: list[str], sample_rows: int, shown: str, notes: list[str], inline: dict[str, str]
) -> tuple[Parse, list[Column], int]:
    """Layout, columns (named when there is a header) and number of data records of a delimited sample."""
    layout = choose_layout(lines, sample_rows + 1, shown, notes, inline)
    records = layout.records
    header = looks_like_header(records)
    names = [f.strip() for f in records[0]] if header else None
    body = records[1:] if header else records[:sample_rows]
    starts = layout.lines[1 : len(body) + 1] if header else layout.lines[: len(body)]
    if not body:
        raise InferError(f"{shown}: no data records after the header")
    counts = Counter(len(r) for r in body)
    layout.field_counts = [n for n, seen in counts.most_common() if seen > 0.01 * len(body)]
    layout.header = names
    rare = {n: seen for n, seen in counts.items() if n not in layout.field_counts}
    if rare:
        listed = ", ".join(f"{seen} with {n}" for n, seen in sorted(rare.items()))
        notes.append(
            f"{sum(rare.values())} of {len(body)} sampled records have another field count "
            f"({listed}): ingest quarantines them as field_count"
        )
    if layout.blank:
        notes.append(f"{layout.blank} blank lines in the sample: ingest quarantines them")
    if names is not None:
        if len(set(names)) != len(names) or not all(names):
            notes.append("some header names are empty or repeated: those columns are given by position")
    else:
        notes.append("no header row detected: columns are given by 0-based position")
    # records of a rare field count are quarantined whole (field_count): their fields, shifted, would
    # only blur the columns and be counted as empty labels or texts
    kept = [(r, line) for r, line in zip(body, starts, strict=True) if len(r) in layout.field_counts]
    columns = table_of_records([r for r, _ in kept], names, min(layout.field_counts), [n for _, n in kept])
    return layout, columns, len(body)


def delimited_format(layout: Parse, encoding: str, bom: bool, inline: dict[str, str]) -> dict[str, Any]:
    """The contract's `format:` fields for a delimited file, with a comment on those read off the data."""
    fmt: dict[str, Any] = {
        "delimiter": layout.delimiter,
        "quoting": layout.quoting,
        "header": layout.header is not None,
        "encoding": encoding,
    }
    if bom:
        fmt["bom"] = "allow"
        inline["format.bom"] = "the file starts with a UTF-8 byte-order mark: stripped and counted"
    fmt["field_counts"] = layout.field_counts
    inline["format.field_counts"] = "field counts seen in the sample, most common first"
    if layout.header is not None:
        names = ", ".join(layout.header)
        inline["format.header"] = names if len(names) <= 90 else names[:87] + "..."
    return fmt
