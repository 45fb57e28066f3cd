"""Split one raw file into data records without losing or merging any of them.

For delimited files a *data record* is what the contract's quoting rule makes of the file after the
header:
- `quoting: none`: every physical line is one record (quotes are text), blank lines included;
- `quoting: csv`: every record the CSV grammar yields; a quoted field may span several physical
  lines, and the record's line number is the physical line where it starts.
For JSON Lines a record is a physical line; for Parquet it is a row (its "line" is the row number).
Every record is returned, well-formed or not, so the caller can account for all of them.
A file that does not look like its contract at all (empty, binary, wrong delimiter) raises
`SourceFileError` instead, because quarantining every line of the wrong file helps nobody.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from simpair.contracts import FileFormat


class SourceFileError(Exception):
    """A whole file cannot be ingested under its contract; the message names the file and the expectation."""


@dataclass
class RawRecord:
    line: int  # 1-based physical line where the record starts
    raw: str  # the record's text as read (line terminators removed; inner newlines of csv records kept)
    fields: list[Any] | None  # text for delimited files, typed values for parquet/jsonl; None if broken
    error: tuple[str, str] | None = None  # (reason, detail) for records broken before field mapping


@dataclass
class ReadResult:
    records: list[RawRecord]
    header: list[str] | None
    stats: Counter[str] = field(default_factory=Counter)


def _describe_delimiter(delimiter: str) -> str:
    return {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}.get(delimiter, repr(delimiter))


def _decode_lines(path: Path, data: bytes, fmt: FileFormat, stats: Counter[str]) -> list[tuple[str, bool]]:
    """Physical lines as (text, decoded_ok); a line that is not valid in the encoding is kept escaped."""
    if data.startswith(codecs.BOM_UTF8) and fmt.encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        if fmt.bom == "forbid":
            raise SourceFileError(f"{path}: starts with a UTF-8 byte-order mark, which the contract forbids")
        data = data[len(codecs.BOM_UTF8) :]
        stats["bom"] += 1
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()  # the terminator of the last line does not start another line
    lines: list[tuple[str, bool]] = []
    for piece in pieces:
        if piece.endswith(b"\r"):
            piece = piece[:-1]
            stats["crlf_lines"] += 1
        try:
            lines.append((piece.decode(fmt.encoding), True))
        except UnicodeDecodeError:
            lines.append((piece.decode(fmt.encoding, errors="backslashreplace"), False))
            stats["undecodable_lines"] += 1
    stats["physical_lines"] = len(lines)
    return lines


def _plain_records(lines: list[tuple[str, bool]], fmt: FileFormat, start: int) -> Iterator[RawRecord]:
    for offset, (text, ok) in enumerate(lines):
        number = start + offset
        if not ok:
            yield RawRecord(number, text, None, ("encoding", f"not valid {fmt.encoding}"))
        else:
            yield RawRecord(number, text, text.split(fmt.delimiter))


def _csv_records(lines: list[tuple[str, bool]], fmt: FileFormat) -> Iterator[RawRecord]:
    """Records of a CSV-quoted file with the physical line each starts on and its raw text."""
    consumed: list[str] = []
    bad_lines: set[int] = set()

    def feed() -> Iterator[str]:
        for number, (text, ok) in enumerate(lines, start=1):
            consumed.append(text)
            if not ok:
                bad_lines.add(number)
            yield text + "\n"

    reader = csv.reader(feed(), delimiter=fmt.delimiter, quotechar=fmt.quotechar, strict=False)
    start = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a NUL byte; the lines read so far form one broken record
            raw = "\n".join(consumed[start - 1 : reader.line_num])
            yield RawRecord(start, raw, None, ("csv_parse", str(exc)))
            start = reader.line_num + 1
            continue
        end = reader.line_num
        raw = "\n".join(consumed[start - 1 : end])
        if any(n in bad_lines for n in range(start, end + 1)):
            yield RawRecord(start, raw, None, ("encoding", f"not valid {fmt.encoding}"))
        else:
            yield RawRecord(start, raw, fields)
        start = end + 1


class EmptySourceFileError(SourceFileError):
    """A file with no data record (empty, blank, or a header alone).

    Fatal when it is a split's only file; in a multi-file split it is recorded as empty instead, so a
    daily drop with nothing in it does not fail the night.
    """


def read_records(path: Path, fmt: FileFormat) -> ReadResult:
    """Read one local file into data records (see `read_source`)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return read_source(data, str(path), fmt)


def read_source(data: bytes, name: str, fmt: FileFormat) -> ReadResult:
    """Records of one file's (decompressed) content, or `SourceFileError` if it cannot match the contract."""
    if fmt.kind == "parquet":
        return _parquet_records(data, name)
    if not data.removeprefix(codecs.BOM_UTF8).strip():  # a BOM and blank lines hold no record either
        raise EmptySourceFileError(f"{name}: file is empty; expected {fmt.encoding} text records")
    if b"\x00" in data[:65536] and not fmt.encoding.lower().startswith("utf-16"):
        expected = (
            "JSON Lines" if fmt.kind == "jsonl" else f"{_describe_delimiter(fmt.delimiter or '')}-separated"
        )
        raise SourceFileError(f"{name}: looks binary (NUL bytes); expected {fmt.encoding} text, {expected}")
    stats: Counter[str] = Counter()
    lines = _decode_lines(Path(name), data, fmt, stats)
    if fmt.kind == "jsonl":
        return _jsonl_records(lines, name, fmt, stats)

    records = list(_csv_records(lines, fmt) if fmt.quoting == "csv" else _plain_records(lines, fmt, 1))
    header: list[str] | None = None
    if fmt.header:
        if not records or records[0].fields is None:
            raise SourceFileError(f"{name}: expected a header row, found no readable first line")
        header = [h.strip() for h in records[0].fields]
        records = records[1:]
    if not records:
        raise EmptySourceFileError(f"{name}: no data records after the header; expected at least one")
    stats["data_records"] = len(records)
    _check_layout(records, lines, name, fmt)
    return ReadResult(records=records, header=header, stats=stats)


def _check_layout(
    records: list[RawRecord], lines: list[tuple[str, bool]], name: str, fmt: FileFormat
) -> None:
    """Fail the file when most records do not have an allowed field count: wrong delimiter, wrong file."""
    assert fmt.field_counts is not None and fmt.delimiter is not None
    counted = Counter(len(r.fields) for r in records if r.fields is not None)
    valid = sum(counted[n] for n in fmt.field_counts)
    if valid >= fmt.min_valid_fraction * len(records):
        return
    usual, _ = counted.most_common(1)[0] if counted else (0, 0)
    undecodable = sum(1 for r in records if r.fields is None)
    if undecodable > len(records) // 2:
        raise SourceFileError(
            f"{name}: {undecodable} of {len(records)} records are not valid {fmt.encoding}; "
            f"expected {fmt.encoding} text (wrong encoding or a binary file?)"
        )
    message = (
        f"{name}: expected {' or '.join(map(str, fmt.field_counts))} "
        f"{_describe_delimiter(fmt.delimiter)}-separated fields per record, but only {valid} of "
        f"{len(records)} records have that (most have {usual})"
    )
    raise SourceFileError(message + (_csv_hint(lines, fmt) or "; wrong delimiter or wrong file?"))


def _csv_hint(lines: list[tuple[str, bool]], fmt: FileFormat) -> str | None:
    """Suggest `quoting: csv` when reading the same lines with CSV quoting fits the contract."""
    if fmt.quoting != "none" or not any(fmt.quotechar in text for text, _ in lines):
        return None
    assert fmt.field_counts is not None
    as_csv = list(_csv_records(lines, fmt.model_copy(update={"quoting": "csv"})))
    if fmt.header:
        as_csv = as_csv[1:]
    fits = sum(1 for r in as_csv if r.fields is not None and len(r.fields) in fmt.field_counts)
    spanning = sum(1 for r in as_csv if "\n" in r.raw)
    if not as_csv or fits < fmt.min_valid_fraction * len(as_csv):
        return None
    return (
        f"; read with CSV quoting, {fits} of {len(as_csv)} records fit and {spanning} quoted fields span "
        "lines: set format.quoting: csv"
    )


def _jsonl_records(
    lines: list[tuple[str, bool]], name: str, fmt: FileFormat, stats: Counter[str]
) -> ReadResult:
    """One record per physical line; the header is every key seen, in first-seen order."""
    parsed: list[tuple[int, str, dict[str, object] | None, tuple[str, str] | None]] = []
    keys: dict[str, None] = {}
    for number, (text, ok) in enumerate(lines, start=1):
        if not ok:
            parsed.append((number, text, None, ("encoding", f"not valid {fmt.encoding}")))
            continue
        if not text.strip():
            parsed.append((number, text, {}, None))
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            parsed.append((number, text, None, ("json_parse", f"not JSON: {exc.msg} at column {exc.colno}")))
            continue
        if not isinstance(value, dict):
            parsed.append(
                (number, text, None, ("json_parse", f"expected a JSON object, got {type(value).__name__}"))
            )
            continue
        keys.update(dict.fromkeys(value))
        parsed.append((number, text, value, None))
    broken = sum(1 for *_, error in parsed if error is not None)
    if broken > len(parsed) // 2:
        raise SourceFileError(
            f"{name}: {broken} of {len(parsed)} lines are not JSON objects; expected JSON Lines"
        )
    header = list(keys)
    records = [
        RawRecord(
            number, text, None if obj is None else ([] if not obj else [obj.get(k) for k in header]), error
        )
        for number, text, obj, error in parsed
    ]
    stats["data_records"] = len(records)
    return ReadResult(records=records, header=header, stats=stats)


def _parquet_records(data: bytes, name: str) -> ReadResult:
    """One record per row; `line` is the 1-based row number and `raw` the row as JSON."""
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise SourceFileError(f"{name}: not a readable Parquet file: {exc}") from exc
    if table.num_rows == 0:
        raise EmptySourceFileError(f"{name}: Parquet file has no rows")
    header = list(table.column_names)
    records = []
    for number, row in enumerate(table.to_pylist(), start=1):
        raw = json.dumps(row, ensure_ascii=False, default=str)
        records.append(RawRecord(number, raw, [row[k] for k in header]))
    stats: Counter[str] = Counter({"data_records": len(records)})
    return ReadResult(records=records, header=header, stats=stats)
