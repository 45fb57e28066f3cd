"""Vectorised parsing of one chunk of a delimited `quoting: none` UTF-8 file: the common path.

Most lines of a real file are plain: valid UTF-8, printable ASCII, the right field count, a label
that is a plain number, texts whose only cleaning is of spaces. Those are mapped to candidate rows
with numpy and polars expressions over the whole chunk. Every other line is *flagged* and handed
back as its raw bytes, for the per-record code (`rows.build_candidates`) to decide exactly as it
always did, so reasons, details and cleaning counts do not depend on which path a line took.
"""

from __future__ import annotations

import codecs
import threading
from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from simpair.contracts import Contract

# A plain decimal number; anything else (inf, 1_000, hex...) is left to Python's float().
_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_errors = threading.local()


def _note_error(exc: UnicodeError) -> tuple[str, int]:
    assert isinstance(exc, UnicodeDecodeError)
    _errors.positions.append(exc.start)
    return "", exc.end


codecs.register_error("simpair-note", _note_error)


def eligible(contract: Contract) -> bool:
    """Whether a source's delimited files can take the vectorised path."""
    fmt = contract.format
    return (
        fmt.kind == "delimited"
        and fmt.quoting == "none"
        and fmt.encoding.lower().replace("_", "-") in ("utf-8", "utf8")
        and fmt.delimiter is not None
        and fmt.delimiter.isascii()
        and fmt.delimiter not in "\r\n"
        and contract.columns.text_pair is None
    )


@dataclass
class FastChunk:
    rows: pl.DataFrame  # candidate rows (columns as rows.Candidates), for the lines not flagged
    flagged: list[tuple[int, bytes]]  # (line number, raw bytes without the \n) for the per-record path
    field_counts: Counter[int]  # field counts of every decodable line, for the file's layout test
    crlf: int
    undecodable: int
    whitespace_fixes: int  # cleaning of the rows mapped here (flagged rows are counted by clean_text)


def _bad_utf8_lines(chunk: bytes, starts: np.ndarray) -> np.ndarray:
    """Indexes of lines holding bytes that are not UTF-8: one decode, errors noted by byte position."""
    _errors.positions = []
    chunk.decode("utf-8", errors="simpair-note")
    if not _errors.positions:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.searchsorted(starts, np.asarray(_errors.positions), side="right") - 1)


def parse_chunk(
    chunk: bytes, first: int, contract: Contract, positions: dict[str, list[int]], split: str | None, tag: str
) -> FastChunk:
    """Candidate rows of a newline-aligned chunk whose first line is number `first`."""
    fmt = contract.format
    assert fmt.delimiter is not None and fmt.field_counts is not None
    data = np.frombuffer(chunk, dtype=np.uint8)
    newlines = np.flatnonzero(data == 10)
    ends = newlines if chunk.endswith(b"\n") else np.append(newlines, len(chunk))
    n = len(ends)
    starts = np.concatenate(([0], newlines + 1))[:n]
    crlf = (ends > starts) & (data[np.maximum(ends - 1, 0)] == 13)
    lengths = ends - starts - crlf
    keep = np.ones(len(data), dtype=bool)
    keep[newlines] = False
    keep[(ends - 1)[crlf]] = False
    text = data[keep]  # the lines' bytes back to back, terminators removed
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    bad = _bad_utf8_lines(chunk, starts)
    if len(bad):
        text = text.copy()
        for i in bad:  # keep the arrow array valid; these lines are decided by the per-record path
            text[offsets[i] : offsets[i + 1]] = 63
    odd = (text < 32) | (text > 126)
    odd &= text != ord(fmt.delimiter)
    odd_lines = np.zeros(n, dtype=bool)
    odd_lines[np.searchsorted(offsets, np.flatnonzero(odd), side="right") - 1] = True
    # A line starting with a space or tab may be blank (an `empty_line` to Python): the per-record path
    # decides; a line starting with anything else printable is not.
    first_byte = text[np.minimum(offsets[:-1], max(len(text) - 1, 0))] if len(text) else np.zeros(n, np.uint8)
    blank = (lengths == 0) | (first_byte == 32) | (first_byte == 9)
    lines = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    undecodable = np.zeros(n, dtype=bool)
    undecodable[bad] = True
    frame = pl.DataFrame(
        {
            "line": pl.Series(np.arange(first, first + n, dtype=np.int64)),
            "raw": pl.from_arrow(lines),
            "plain": pl.Series(~(odd_lines | undecodable | blank)),
            "undecodable": pl.Series(undecodable),
        }
    )
    frame = frame.with_columns(pl.col("raw").str.split(fmt.delimiter).alias("_f"))
    frame = frame.with_columns(pl.col("_f").list.len().alias("_n"))
    counts = frame.filter(~pl.col("undecodable"))["_n"].value_counts()
    field_counts = Counter(dict(zip(counts["_n"].to_list(), counts["count"].to_list(), strict=True)))
    rows, flagged_mask, fixes = _map(frame, contract, positions, split, tag)
    flagged_lines = np.flatnonzero(flagged_mask.to_numpy())
    flagged = [(first + int(i), chunk[starts[i] : ends[i]]) for i in flagged_lines]
    return FastChunk(rows, flagged, field_counts, int(crlf.sum()), len(bad), fixes)


def _field(i: int) -> pl.Expr:
    return pl.col("_f").list.get(i, null_on_oob=True)


def _map(
    frame: pl.DataFrame, contract: Contract, positions: dict[str, list[int]], split: str | None, tag: str
) -> tuple[pl.DataFrame, pl.Series, int]:
    """(rows of the plain lines, mask of the lines to flag, whitespace fixes made to the rows)."""
    fmt = contract.format
    assert fmt.field_counts is not None
    ok = pl.col("plain") & pl.col("_n").is_in(fmt.field_counts)
    if split is None:
        assert contract.split_column is not None
        mapping = contract.split_column.values
        value = _field(positions["split"][0]).str.strip_chars(" ")
        split_expr = value.replace_strict(list(mapping), list(mapping.values()), default=None)
    else:
        split_expr = pl.lit(split)
    label_text = _field(positions["label"][0]).str.strip_chars(" ")
    number = pl.when(label_text.str.contains(_NUMBER)).then(label_text.cast(pl.Float64, strict=False))
    columns = [split_expr.alias("split"), number.alias("score_raw")]
    for name, i in zip(("text_a", "text_b"), positions["texts"], strict=True):
        columns.append(_field(i).alias(name))
    frame = frame.with_columns(columns)
    if contract.label.kind == "binary":
        label_ok = (pl.col("score_raw") == pl.col("score_raw").floor()) & (pl.col("score_raw").abs() <= 127)
        label = pl.when(label_ok).then(pl.col("score_raw")).cast(pl.Int8, strict=False)
        score = pl.lit(None, dtype=pl.Float64)
    else:
        assert contract.label.range is not None
        low, high = contract.label.range
        label_ok = pl.col("score_raw").is_finite()
        label = pl.lit(None, dtype=pl.Int8)
        score = (pl.col("score_raw") - low) / (high - low)
    ok = ok & pl.col("split").is_not_null() & label_ok.fill_null(False)
    frame = frame.with_columns(ok.fill_null(False).alias("_ok"))
    flagged = ~frame["_ok"]
    # Printable ASCII texts need at most whitespace cleaning: runs of spaces collapsed, ends trimmed,
    # exactly what clean_text does to them (counted the same way: one fix per text changed).
    good = frame.filter(pl.col("_ok")).with_columns(
        pl.col(t).str.replace_all("  +", " ").str.strip_chars(" ").alias(f"{t}_clean")
        for t in ("text_a", "text_b")
    )
    fixes = sum(int((good[t] != good[f"{t}_clean"]).sum()) for t in ("text_a", "text_b"))
    good = good.drop("text_a", "text_b").rename({"text_a_clean": "text_a", "text_b_clean": "text_b"})
    ids = [_field(i).str.strip_chars(" ") for i in positions["pair_id"]]
    if ids:
        pair_id = pl.concat_str(ids, separator=contract.columns.pair_id_separator)
    else:
        pair_id = pl.concat_str([pl.col("split"), pl.lit(tag), pl.col("line").cast(pl.Utf8)], separator="-")
    extras = [
        _field(i).alias(e.name) for e, i in zip(contract.columns.extra, positions["extra"], strict=True)
    ]
    rows = good.select(
        "line",
        "raw",
        "split",
        pair_id.alias("pair_id"),
        "text_a",
        "text_b",
        label.alias("label"),
        score.alias("score"),
        "score_raw",
        *extras,
    )
    return rows, flagged, fixes
