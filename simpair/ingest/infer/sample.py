"""Read the head of a raw file and sniff what it is: its format kind, compression and text encoding.

Only the first decompressed bytes are read (a draft needs the first records, not the whole file), and
anything that is not text records (a missing file, a binary, UTF-16) is refused with one line naming it.
"""

from __future__ import annotations

import codecs
import unicodedata
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TypeVar

import pyarrow as pa

from simpair.ingest.infer.errors import InferError
from simpair.ingest.sources import SourceAccessError, SourceRoot, compression_of, decompress

# Beyond this much decompressed text the sample is cut at a line break: the first records are enough.
MAX_SAMPLE_BYTES = 64 << 20
# Lines of the sample that do not decode, named in the review note (the count covers the rest).
_BAD_LINES_SHOWN = 10
R = TypeVar("R")


def _split_location(location: str | Path) -> tuple[SourceRoot, str]:
    text = str(location)
    if "://" in text and not text.startswith("file://"):
        root, _, name = text.rstrip("/").rpartition("/")
        return SourceRoot.of(root), name
    path = Path(text.removeprefix("file://"))
    return SourceRoot.of(path.parent), path.name


def _read_local_head(path: Path, codec: str | None, shown: str) -> bytes:
    """The first decompressed bytes (one more than the sample cap, to tell a cut), not the whole file."""
    try:
        if not path.is_file():
            path.open("rb").close()  # says why: missing, a folder, no permission
            raise InferError(f"{shown}: cannot read: not a regular file")
        raw = pa.OSFile(str(path))
    except OSError as exc:
        raise InferError(f"{shown}: cannot read: {exc.strerror or exc}") from exc
    with raw:
        if codec is None:
            return raw.read(MAX_SAMPLE_BYTES + 1)
        try:
            return pa.CompressedInputStream(raw, codec).read(MAX_SAMPLE_BYTES + 1)
        except (OSError, pa.ArrowException) as exc:
            raise InferError(f"{shown}: cannot decompress as {codec}: {exc}") from exc


def read_head(location: str | Path) -> tuple[str, bytes]:
    """(file name, decompressed bytes); anything unreadable becomes an InferError naming the file."""
    root, name = _split_location(location)
    shown = str(location)
    codec = compression_of(name)
    if not root.is_remote and kind_by_name(name) != "parquet":
        data = _read_local_head(Path(root.display(name)), codec, shown)
    else:
        try:
            stored = root.read_bytes(name)
        except SourceAccessError as exc:  # names the URL already
            raise InferError(str(exc)) from exc
        except OSError as exc:
            raise InferError(f"{shown}: cannot read: {exc.strerror or exc}") from exc
        try:
            data = decompress(stored, codec, shown)
        except OSError as exc:
            raise InferError(str(exc)) from exc
    if not data.removeprefix(codecs.BOM_UTF8).strip():
        raise InferError(f"{shown}: file is empty; nothing to infer a contract from")
    return name, data


def kind_by_name(name: str) -> str:
    """`parquet`, `jsonl` or `delimited`, by the file's suffix once a compression suffix is dropped."""
    path = PurePosixPath(name.lower())
    if compression_of(name) is not None:
        path = path.with_suffix("")
    if path.suffix in (".parquet", ".pq"):
        return "parquet"
    if path.suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    return "delimited"


def decode(data: bytes, shown: str, notes: list[str]) -> tuple[str, str, bool]:
    """(text, encoding, had_bom) of the sample; binary-looking content is refused."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InferError(f"{shown}: looks like UTF-16 text; convert it to UTF-8 first")
    if b"\x00" in data[:65536]:
        raise InferError(f"{shown}: looks binary (NUL bytes); expected text records")
    bom = data.startswith(codecs.BOM_UTF8)
    data = data.removeprefix(codecs.BOM_UTF8)
    if len(data) > MAX_SAMPLE_BYTES:
        data = data[: data.rfind(b"\n", 0, MAX_SAMPLE_BYTES) + 1 or MAX_SAMPLE_BYTES]
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        text, encoding = _mostly_utf8(data, exc, notes)
    probe = text[:65536]
    controls = sum(1 for ch in probe if ch not in "\t\n\r" and unicodedata.category(ch) == "Cc")
    if probe and controls > 0.01 * len(probe):
        raise InferError(f"{shown}: looks binary ({controls} control characters in the first {len(probe)})")
    return text, encoding, bom


def _mostly_utf8(data: bytes, error: UnicodeDecodeError, notes: list[str]) -> tuple[str, str]:
    """(text, encoding) of a sample that is not valid UTF-8 as a whole, decided by its multi-byte sequences.

    A UTF-8 export with a few broken bytes is still UTF-8: its accents and curly quotes are valid
    multi-byte sequences, which a latin-1 or cp1252 file almost never forms by chance (an accented
    capital followed by a symbol byte). Reading such a file as latin-1 would turn every accent into
    mojibake (and C1 control characters), so it stays utf-8 when valid multi-byte characters are at
    least as many as the bytes that do not decode, and the lines holding those bytes are named; ingest
    quarantines them with reason `encoding`. Otherwise latin-1 is proposed, as the encoding that
    reads any byte. (charset-normalizer is no help here: it drops UTF-8 at the first invalid byte and
    guesses among single-byte code pages, e.g. iso8859_10 for one `é` and one stray `\\xff`.)
    """
    # surrogateescape turns each byte that does not decode into one lone surrogate U+DC80..U+DCFF,
    # which valid UTF-8 never yields: every other non-ASCII character is a valid multi-byte sequence
    text = data.decode("utf-8", errors="surrogateescape")
    invalid = sum(1 for ch in text if "\udc80" <= ch <= "\udcff")
    multibyte = sum(1 for ch in text if ch > "\x7f") - invalid
    bad_lines: list[int] = []
    undecodable = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.isascii():
            continue
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
            if len(bad_lines) < _BAD_LINES_SHOWN:
                bad_lines.append(number)
    if multibyte and multibyte >= invalid:
        shown = ", ".join(str(n) for n in bad_lines) + (", ..." if undecodable > len(bad_lines) else "")
        which = f"line {shown} is" if undecodable == 1 else f"lines {shown} ({undecodable} sampled) are"
        bytes_ = "a byte that does" if invalid == 1 else f"{invalid} bytes that do"
        chars = "character" if multibyte == 1 else "characters"
        notes.append(
            f"{which} not valid UTF-8 ({bytes_} not decode), while the sample holds {multibyte} valid "
            f"multi-byte UTF-8 {chars} (accents, curly quotes, ...): encoding utf-8 is proposed, "
            "and ingest quarantines the lines that do not decode with reason encoding; fix them at the "
            "source if they matter"
        )
        return data.decode("utf-8", errors="backslashreplace"), "utf-8"
    line = data.count(b"\n", 0, error.start) + 1
    notes.append(
        f"the file is not valid UTF-8 (first bad byte on line {line}; {invalid} bytes do not decode "
        f"against {multibyte} valid multi-byte characters); encoding latin-1 is proposed because it reads "
        "any byte: check the source's real encoding (often cp1252 for Windows exports)"
    )
    return data.decode("latin-1"), "latin-1"


def first_records(
    lines: list[str], limit: int, parse: Callable[[str], R | None]
) -> tuple[list[R], list[int], int, int]:
    """The first `limit` records of the sample's non-blank lines and their 1-based line numbers, with
    how many lines were blank and how many `parse` refused (None: that line is no record)."""
    records: list[R] = []
    numbers: list[int] = []
    blank = refused = 0
    for number, line in enumerate(lines, start=1):
        if len(records) >= limit:
            break
        if not line.strip():
            blank += 1
            continue
        record = parse(line)
        if record is None:
            refused += 1
            continue
        records.append(record)
        numbers.append(number)
    return records, numbers, blank, refused
