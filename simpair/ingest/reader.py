"""Split one raw file into data records without losing or merging any of them.

A *data record* is what the contract's quoting rule makes of the file after the header:
- `quoting: none`: every physical line is one record (quotes are text), blank lines included;
- `quoting: csv`: every record the CSV grammar yields; a quoted field may span several physical
  lines, and the record's line number is the physical line where it starts.
Every record is returned, well-formed or not, so the caller can account for all of them.
A file that does not look like its contract at all (empty, binary, wrong delimiter) raises
`SourceFileError` instead, because quarantining every line of the wrong file helps nobody.
"""

from __future__ import annotations

import codecs
import csv
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from simpair.contracts import FileFormat


class SourceFileError(Exception):
    """A whole file cannot be ingested under its contract; the message names the file and the expectation."""


@dataclass
class RawRecord:
    line: int  # 1-based physical line where the record starts
    raw: str  # the record's text as read (line terminators removed; inner newlines of csv records kept)
    fields: list[str] | None  # None when the record could not be decoded
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


def read_records(path: Path, fmt: FileFormat) -> ReadResult:
    """Read one file into data records, or raise `SourceFileError` if it cannot match the contract."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not data.removeprefix(codecs.BOM_UTF8).strip():  # a BOM and blank lines hold no record either
        raise SourceFileError(f"{path}: file is empty; expected {fmt.encoding} text records")
    if b"\x00" in data[:65536] and not fmt.encoding.lower().startswith("utf-16"):
        raise SourceFileError(
            f"{path}: looks binary (NUL bytes); expected {fmt.encoding} text with "
            f"{_describe_delimiter(fmt.delimiter)}-separated fields"
        )
    stats: Counter[str] = Counter()
    lines = _decode_lines(path, data, fmt, stats)

    records = list(_csv_records(lines, fmt) if fmt.quoting == "csv" else _plain_records(lines, fmt, 1))
    header: list[str] | None = None
    if fmt.header:
        if not records or records[0].fields is None:
            raise SourceFileError(f"{path}: expected a header row, found no readable first line")
        header = [h.strip() for h in records[0].fields]
        records = records[1:]
    if not records:
        raise SourceFileError(f"{path}: no data records after the header; expected at least one")
    stats["data_records"] = len(records)

    counted = Counter(len(r.fields) for r in records if r.fields is not None)
    valid = sum(counted[n] for n in fmt.field_counts)
    if valid < fmt.min_valid_fraction * len(records):
        usual, _ = counted.most_common(1)[0] if counted else (0, 0)
        undecodable = sum(1 for r in records if r.fields is None)
        if undecodable > len(records) // 2:
            raise SourceFileError(
                f"{path}: {undecodable} of {len(records)} records are not valid {fmt.encoding}; "
                f"expected {fmt.encoding} text (wrong encoding or a binary file?)"
            )
        raise SourceFileError(
            f"{path}: expected {' or '.join(map(str, fmt.field_counts))} "
            f"{_describe_delimiter(fmt.delimiter)}-separated fields per record, but only {valid} of "
            f"{len(records)} records have that (most have {usual}); wrong delimiter or wrong file?"
        )
    return ReadResult(records=records, header=header, stats=stats)
