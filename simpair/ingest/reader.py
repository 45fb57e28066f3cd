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
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
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


_ESCAPED_BYTE = re.compile(r"\\x[0-9a-f]{2}")


def undecodable_record(text: str, encoding: str) -> tuple[str, str]:
    """The (reason, detail) of a record whose bytes are not valid in `encoding`.

    `text` is the record decoded with backslashreplace, so the first bad byte shows as `\\xNN`: the
    detail names it and where it sits, e.g. `not valid utf-8: byte \\xff at character 5`.
    """
    found = _ESCAPED_BYTE.search(text)
    if found is None:
        return "encoding", f"not valid {encoding}"
    return "encoding", f"not valid {encoding}: byte {found.group()} at character {found.start() + 1}"


def _describe_delimiter(delimiter: str) -> str:
    return {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}.get(delimiter, repr(delimiter))


def _decode_lines(path: Path, data: bytes, fmt: FileFormat, stats: Counter[str]) -> list[tuple[str, bool]]:
    """Physical lines as (text, decoded_ok); a line that is not valid in the encoding is kept escaped."""
    if data.startswith(codecs.BOM_UTF8) and is_utf8(fmt):
        if fmt.bom == "forbid":
            raise SourceFileError(f"{path}: starts with a UTF-8 byte-order mark, which the contract forbids")
        data = data[len(codecs.BOM_UTF8) :]
        stats["bom"] += 1
    lines = decode_pieces(split_lines(data), fmt, stats)
    stats["physical_lines"] = len(lines)
    return lines


def is_utf8(fmt: FileFormat) -> bool:
    return fmt.encoding.lower().replace("_", "-") in ("utf-8", "utf8")


def split_lines(data: bytes) -> list[bytes]:
    """Physical lines of newline-terminated text; the last terminator does not start another line."""
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    return pieces


def decode_pieces(pieces: list[bytes], fmt: FileFormat, stats: Counter[str]) -> list[tuple[str, bool]]:
    """Lines (without their \\n) as (text, decoded_ok), CRLF terminators removed and counted."""
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
    return lines


def _plain_records(lines: list[tuple[str, bool]], fmt: FileFormat, start: int) -> Iterator[RawRecord]:
    for offset, (text, ok) in enumerate(lines):
        number = start + offset
        if not ok:
            yield RawRecord(number, text, None, undecodable_record(text, fmt.encoding))
        else:
            yield RawRecord(number, text, text.split(fmt.delimiter))


def _csv_records(lines: Iterable[tuple[str, bool]], fmt: FileFormat) -> Iterator[RawRecord]:
    """Records of a CSV-quoted file with the physical line each starts on and its raw text.

    Lines are consumed as the CSV grammar asks for them and forgotten once their record is out, so a
    stream of lines of any length is read with the memory of one record.
    """
    pending: list[str] = []  # the lines of the record being read, from `start` on
    bad_lines: set[int] = set()

    def feed() -> Iterator[str]:
        for number, (text, ok) in enumerate(lines, start=1):
            pending.append(text)
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
            end = reader.line_num
            yield RawRecord(start, "\n".join(pending[: end - start + 1]), None, ("csv_parse", str(exc)))
        else:
            end = reader.line_num
            raw = "\n".join(pending[: end - start + 1])
            if bad_lines and any(n in bad_lines for n in range(start, end + 1)):
                yield RawRecord(start, raw, None, undecodable_record(raw, fmt.encoding))
            else:
                yield RawRecord(start, raw, fields)
        del pending[: end - start + 1]
        bad_lines.difference_update(range(start, end + 1))
        start = end + 1


JsonLine = tuple[int, str, "dict[str, object] | None", "tuple[str, str] | None"]


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
    counted = Counter(len(r.fields) for r in records if r.fields is not None)
    undecodable = sum(1 for r in records if r.fields is None)
    check_layout(counted, undecodable, len(records), name, fmt, lambda: iter(lines))


def check_layout(
    counted: Counter[int],
    unreadable: int,
    records: int,
    name: str,
    fmt: FileFormat,
    lines: Callable[[], Iterator[tuple[str, bool]]],
) -> None:
    """Fail the file when most records do not have an allowed field count: wrong delimiter, wrong file.

    Decided from counts gathered while streaming; `lines` re-reads the file only to word the error.
    """
    assert fmt.field_counts is not None and fmt.delimiter is not None
    valid = sum(counted[n] for n in fmt.field_counts)
    if valid >= fmt.min_valid_fraction * records:
        return
    usual, _ = counted.most_common(1)[0] if counted else (0, 0)
    if unreadable > records // 2:
        raise SourceFileError(
            f"{name}: {unreadable} of {records} records are not valid {fmt.encoding}; "
            f"expected {fmt.encoding} text (wrong encoding or a binary file?)"
        )
    message = (
        f"{name}: expected {' or '.join(map(str, fmt.field_counts))} "
        f"{_describe_delimiter(fmt.delimiter)}-separated fields per record, but only {valid} of "
        f"{records} records have that (most have {usual})"
    )
    raise SourceFileError(message + (_csv_hint(lines, fmt) or "; wrong delimiter or wrong file?"))


def _csv_hint(lines: Callable[[], Iterator[tuple[str, bool]]], fmt: FileFormat) -> str | None:
    """Suggest `quoting: csv` when reading the same lines with CSV quoting fits the contract."""
    if fmt.quoting != "none" or not any(fmt.quotechar in text for text, _ in lines()):
        return None
    assert fmt.field_counts is not None
    total = fits = spanning = 0
    for i, r in enumerate(_csv_records(lines(), fmt.model_copy(update={"quoting": "csv"}))):
        if fmt.header and i == 0:
            continue
        total += 1
        fits += r.fields is not None and len(r.fields) in fmt.field_counts
        spanning += "\n" in r.raw
    if not total or fits < fmt.min_valid_fraction * total:
        return None
    return (
        f"; read with CSV quoting, {fits} of {total} records fit and {spanning} quoted fields span "
        "lines: set format.quoting: csv"
    )


def jsonl_line(number: int, text: str, ok: bool, fmt: FileFormat) -> JsonLine:
    """One JSON Lines line: (line, raw, object or None, error or None); a blank line is an empty object."""
    if not ok:
        return number, text, None, undecodable_record(text, fmt.encoding)
    if not text.strip():
        return number, text, {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return number, text, None, ("json_parse", f"not JSON: {exc.msg} at column {exc.colno}")
    if not isinstance(value, dict):
        return number, text, None, ("json_parse", f"expected a JSON object, got {type(value).__name__}")
    return number, text, value, None


def check_jsonl(broken: int, lines: int, name: str) -> None:
    if broken > lines // 2:
        raise SourceFileError(f"{name}: {broken} of {lines} lines are not JSON objects; expected JSON Lines")


def jsonl_record(line: JsonLine, header: list[str]) -> RawRecord:
    number, text, obj, error = line
    return RawRecord(
        number, text, None if obj is None else ([] if not obj else [obj.get(k) for k in header]), error
    )


def _jsonl_records(
    lines: list[tuple[str, bool]], name: str, fmt: FileFormat, stats: Counter[str]
) -> ReadResult:
    """One record per physical line; the header is every key seen, in first-seen order."""
    parsed = [jsonl_line(number, text, ok, fmt) for number, (text, ok) in enumerate(lines, start=1)]
    keys: dict[str, None] = {}
    for _, _, obj, _ in parsed:
        if obj:
            keys.update(dict.fromkeys(obj))
    check_jsonl(sum(1 for *_, error in parsed if error is not None), len(parsed), name)
    header = list(keys)
    records = [jsonl_record(line, header) for line in parsed]
    stats["data_records"] = len(records)
    return ReadResult(records=records, header=header, stats=stats)


def _parquet_records(data: bytes, name: str) -> ReadResult:
    """One record per row; `line` is the 1-based row number and `raw` the row as JSON."""
    header, batches = parquet_batches(pa.BufferReader(data), name)
    records = [r for batch in batches for r in batch]
    stats: Counter[str] = Counter({"data_records": len(records)})
    return ReadResult(records=records, header=header, stats=stats)


def parquet_batches(source: Any, name: str, rows: int = 65536) -> tuple[list[str], Iterator[list[RawRecord]]]:
    """(column names, records in batches of `rows`): a Parquet file is read one record batch at a time."""
    try:
        parquet = pq.ParquetFile(source)
    except (pa.ArrowException, OSError) as exc:
        raise SourceFileError(f"{name}: not a readable Parquet file: {exc}") from exc
    if parquet.metadata.num_rows == 0:
        raise EmptySourceFileError(f"{name}: Parquet file has no rows")
    header = list(parquet.schema_arrow.names)

    def batches() -> Iterator[list[RawRecord]]:
        number = 0
        try:
            for batch in parquet.iter_batches(batch_size=rows):
                out = []
                for row in batch.to_pylist():
                    number += 1
                    raw = json.dumps(row, ensure_ascii=False, default=str)
                    out.append(RawRecord(number, raw, [row[k] for k in header]))
                yield out
        except (pa.ArrowException, OSError) as exc:
            raise SourceFileError(f"{name}: not a readable Parquet file: {exc}") from exc

    return header, batches()
