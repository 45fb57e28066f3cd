"""Vectorised parsing of one chunk of a delimited `quoting: none` UTF-8 file: the common path.

Most lines of a real file are plain: printable ASCII outside the texts, the right field count, a label
that is a plain number, ids without edge spaces, texts whose only cleaning is of spaces (ASCII, or
UTF-8 already in NFC with no mojibake, control character or non-ASCII space: `_plain_unicode`).
One numpy pass over the chunk's bytes finds every delimiter, line end and byte outside printable
ASCII; the fields of the plain lines become polars string columns that point into the chunk's own
buffer (Arrow string views: no Python string, no copy of the texts), and one polars select maps them
to candidate rows. Every other line is *flagged* and handed back as its raw bytes, for the
per-record code (`rows.build_candidates`) to decide exactly as it always did, so reasons, details
and cleaning counts do not depend on which path a line took.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from simpair.contracts import Contract
from simpair.ingest.chunks import Chunk, ends_line
from simpair.ingest.clean import MOJIBAKE, ODD_CHARACTERS

_SPACE, _TAB, _CR, _LF = 32, 9, 13, 10
_INLINE = 12  # an Arrow string view holds strings up to 12 bytes itself, longer ones point to a buffer
_WORD = np.dtype("<u4")
_LONG = np.dtype("<u8")
# The first 0..4 bytes of a word, the first 0..8 bytes of a long word (little-endian: low bytes first).
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(5)], dtype=_WORD)
_LONG_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=_LONG)


def eligible(contract: Contract) -> bool:
    """Whether a source's delimited files can take the vectorised path."""
    fmt = contract.format
    return (
        fmt.kind == "delimited"
        and fmt.quoting == "none"
        and fmt.encoding.lower().replace("_", "-") in ("utf-8", "utf8")
        and fmt.delimiter is not None
        and len(fmt.delimiter) == 1
        and fmt.delimiter.isascii()
        and fmt.delimiter not in "\r\n"
        and fmt.field_counts is not None
        and contract.columns.text_pair is None
    )


@dataclass
class FastChunk:
    rows: pl.DataFrame  # candidate rows (columns as batches.CANDIDATE_SCHEMA), for the lines not flagged
    flagged: list[tuple[int, bytes]]  # (line number, raw bytes without the \n) for the per-record path
    field_counts: np.ndarray  # fields per line, every line of the chunk (undecodable ones included)
    flagged_index: np.ndarray  # positions of the flagged lines in the chunk, for field_counts
    crlf: int
    whitespace_fixes: int  # cleaning of the rows mapped here (flagged rows are counted by clean_text)


@dataclass
class _Bytes:
    """The chunk as numpy bytes (padded so a view's inline bytes can be read past its end).

    `word[o]` and `long[o]` are the 4 and 8 bytes from offset o, strided views of the same memory (no
    copy). A string view's inline part is gathered as one long word and one word, each masked to the
    string's length with a small table: cheaper than one 12-byte gather with a mask per inline word
    (a third less CPU for the 7 columns of an STS-B chunk, 2026-11-26).
    """

    chunk: Chunk
    padded: np.ndarray
    buffer: pa.Buffer
    word: np.ndarray
    long: np.ndarray

    @classmethod
    def of(cls, chunk: Chunk) -> _Bytes:
        padded = np.empty(len(chunk) + _INLINE, dtype=np.uint8)
        padded[: len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
        padded[len(chunk) :] = 0
        word = np.ndarray((len(chunk) + _INLINE - 3,), dtype=_WORD, buffer=padded, strides=(1,))
        long = np.ndarray((len(chunk) + 1,), dtype=_LONG, buffer=padded, strides=(1,))
        return cls(chunk, padded, pa.py_buffer(chunk), word, long)

    def separated(self, delimiters: np.ndarray, separator: int) -> _Bytes:
        """A copy of the chunk with the bytes at `delimiters` replaced by `separator` (for joined ids)."""
        padded = self.padded.copy()
        padded[delimiters] = separator
        word = np.ndarray((len(self.chunk) + _INLINE - 3,), dtype=_WORD, buffer=padded, strides=(1,))
        long = np.ndarray((len(self.chunk) + 1,), dtype=_LONG, buffer=padded, strides=(1,))
        return _Bytes(self.chunk, padded, pa.py_buffer(padded), word, long)

    def _inline(self, views: np.ndarray, start: np.ndarray, length: np.ndarray) -> None:
        """Fill the 12 inline bytes of views of strings up to 12 bytes long (zero past their end)."""
        low = self.long[start] & _LONG_MASKS[np.minimum(length, 8)]
        views[:, 1:3] = low.view(_WORD).reshape(-1, 2)
        views[:, 3] = self.word[start + 8] & _MASKS[np.clip(length - 8, 0, 4)]

    def strings(self, start: np.ndarray, stop: np.ndarray) -> pl.Series:
        """`chunk[start:stop]` for each pair, as a polars string column viewing the chunk's buffer.

        Only ever called on bytes known to be valid UTF-8 (printable ASCII, or texts `_valid_utf8`
        passed): polars trusts string views to be valid UTF-8.
        A view is 16 bytes: the length, then up to 12 bytes inline (zero-padded), or for longer
        strings a 4-byte prefix, the buffer (0: the chunk) and the offset.
        """
        length = stop - start
        views = np.empty((len(start), 4), dtype=_WORD)
        views[:, 0] = length
        near = length <= _INLINE
        if near.all():  # ids, labels: every string inline
            self._inline(views, start, length)
        else:  # texts and lines: most are long, and need only their prefix
            views[:, 1] = self.word[start]
            views[:, 2] = 0
            views[:, 3] = start
            if near.any():
                short = np.flatnonzero(near)
                inline = np.empty((len(short), 4), dtype=_WORD)
                self._inline(inline, start[short], length[short])
                views[short, 1:] = inline[:, 1:]
        array = pa.Array.from_buffers(pa.string_view(), len(views), [None, pa.py_buffer(views), self.buffer])
        return pl.from_arrow(array)  # type: ignore[return-value]


def parse_chunk(
    chunk: Chunk, first: int, contract: Contract, positions: dict[str, list[int]], split: str | None, tag: str
) -> FastChunk:
    """Candidate rows of a newline-aligned chunk whose first line is number `first`."""
    fmt = contract.format
    assert fmt.delimiter is not None and fmt.field_counts is not None
    data = np.frombuffer(chunk, dtype=np.uint8)
    delimiter = ord(fmt.delimiter)
    # One pass: every byte outside printable ASCII (tabs, line ends and odd bytes), plus the delimiter.
    special = np.subtract(data, 32, dtype=np.uint8) > 94
    if 32 <= delimiter < 127:
        special |= data == delimiter
    where = np.flatnonzero(special)
    value = data[where]
    is_cut = (value == delimiter) | (value == _LF)
    cuts = where[is_cut]  # every field ends at one of these
    odd = where[~is_cut]
    line_end = value[is_cut] == _LF
    if not ends_line(chunk):  # the file's last line has no terminator: a virtual one at the end
        cuts = np.append(cuts, len(data))
        line_end = np.append(line_end, True)
    last_cut = np.flatnonzero(line_end)  # per line: the index in `cuts` of its end
    ends = cuts[last_cut]
    n = len(ends)
    starts = np.zeros(n, dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    crlf = (ends > starts) & (data[np.maximum(ends - 1, 0)] == _CR)
    fields = np.diff(last_cut, prepend=-1)
    first_cut = last_cut - fields + 1  # per line: the index in `cuts` of its first field's end
    line_stop = ends - crlf
    # Field k runs from field_start[k] to cuts[k], less the \r of a CRLF line's last field.
    field_start = np.zeros(len(cuts), dtype=np.int64)
    field_start[1:] = cuts[:-1] + 1
    field_end = cuts.copy()
    field_end[last_cut[crlf]] -= 1

    odd_line = np.minimum(np.searchsorted(ends, odd), n - 1)
    ok_cr = (data[odd] == _CR) & (odd == line_stop[odd_line])
    # Bytes past ASCII inside a text field may be plain UTF-8 text: `_plain_unicode` decides those lines.
    field_of = np.searchsorted(cuts, odd) - first_cut[odd_line]
    in_text = (data[odd] >= 0x80) & np.isin(field_of, positions["texts"])
    flag = np.zeros(n, dtype=bool)
    flag[odd_line[~ok_cr & ~in_text]] = True
    unicode_line = np.zeros(n, dtype=bool)
    unicode_line[odd_line[in_text]] = True
    # A line starting with a space or tab may be blank (an `empty_line` to Python): the per-record path
    # decides; a line starting with anything else printable is not.
    padded = _Bytes.of(chunk)
    head = padded.padded[starts]
    flag |= (line_stop == starts) | (head == _SPACE) | (head == _TAB)
    flag |= ~np.isin(fields, fmt.field_counts)
    good = np.flatnonzero(~flag)
    # Where each used field of the good lines starts and ends, gathered once for the edge tests and views.
    base = first_cut[good]
    joined = _joined_ids(contract, positions)
    bounds = {i: (field_start[base + i], field_end[base + i]) for i in _used(positions)}
    if (
        joined
    ):  # one span from the first id's start to the last id's end, read where delimiters became separators
        first_id, last_id = positions["pair_id"][0], positions["pair_id"][-1]
        bounds[-1] = (field_start[base + first_id], field_end[base + last_id])

    def edge_spaced(i: int) -> np.ndarray:
        """Whether field i of each good line starts or ends with a space."""
        start, end = bounds[i]  # an empty field reads a neighbour byte: masked below
        edge = (padded.padded[start] == _SPACE) | (padded.padded[end - 1] == _SPACE)
        return (end > start) & edge

    # Ids and split values are stripped of spaces by the per-record path: leave those with edge spaces to it.
    spaced_ids = np.zeros(len(good), dtype=bool)
    for i in (*positions["pair_id"], *positions["split"]):
        spaced_ids |= edge_spaced(i)
    if spaced_ids.any():
        flag[good[spaced_ids]] = True
        plain = ~spaced_ids
        good = good[plain]
        bounds = {i: (start[plain], end[plain]) for i, (start, end) in bounds.items()}

    unicode = np.flatnonzero(unicode_line[good])
    if len(unicode):  # lines whose texts hold non-ASCII: the per-record path takes any cleaning may change
        odd_text = ~_plain_unicode(padded, [bounds[i] for i in positions["texts"]], unicode)
        if odd_text.any():
            flag[good[unicode[odd_text]]] = True
            plain = np.ones(len(good), dtype=bool)
            plain[unicode[odd_text]] = False
            good = good[plain]
            bounds = {i: (start[plain], end[plain]) for i, (start, end) in bounds.items()}

    def field(i: int) -> pl.Series:
        return padded.strings(*bounds[i])

    spaced = [edge_spaced(i) for i in positions["texts"]]
    pair_ids = None
    if joined:
        separated = padded.separated(cuts[~line_end], ord(contract.columns.pair_id_separator))
        pair_ids = separated.strings(*bounds[-1])
    rows, keep, fixes = _map(field, spaced, good + first, contract, positions, split, tag, pair_ids)
    kept = good[keep]
    flag[good[~keep]] = True
    raw = padded.strings(starts[kept], line_stop[kept])
    rows = rows.filter(pl.Series(keep)).insert_column(1, raw.alias("raw"))
    flagged_index = np.flatnonzero(flag)
    flagged = [(first + int(i), data[starts[i] : ends[i]].tobytes()) for i in flagged_index]
    return FastChunk(rows, flagged, fields, flagged_index, int(crlf.sum()), fixes)


def _plain_unicode(
    padded: _Bytes, texts: list[tuple[np.ndarray, np.ndarray]], rows: np.ndarray
) -> np.ndarray:
    """Whether each of `rows` has texts that `clean_text` can change only in their ASCII spaces.

    True where every text is valid UTF-8 (as Python decodes it), holds no known mojibake, no control
    character, BOM or non-ASCII whitespace, and is already NFC. Those rows then take the plain-text
    path (spaces collapsed and trimmed), with exactly the text and counts the per-record path gives.
    polars' Unicode tables may be newer than Python's; by Unicode's normalization stability a text of
    characters both know normalises alike, and characters only polars knows can make it refuse a
    text, not accept one. On STS-B-shaped data this keeps 99% of the non-ASCII lines here (4,263 of
    4,316 in 406k lines, 2026-11-27); mojibake and odd labels or fields account for the rest.
    """
    start = np.concatenate([first[rows] for first, _ in texts])
    stop = np.concatenate([last[rows] for _, last in texts])
    valid = _valid_utf8(padded.padded, start, stop)
    values = padded.strings(start[valid], stop[valid])  # only valid UTF-8 may become a string view
    odd = values.str.contains_any(list(MOJIBAKE)) | values.str.contains(ODD_CHARACTERS)
    odd = odd | (values.str.normalize("NFC") != values)
    plain = valid.copy()
    plain[valid] = ~odd.to_numpy()
    return plain.reshape(len(texts), len(rows)).all(axis=0)


def _valid_utf8(buffer: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Whether each `buffer[start:stop]` is valid UTF-8, as Python's strict decoder says.

    All of them are decoded at once, joined by newlines (ASCII: no sequence spans two of them). A
    decoding error names the first bad byte: its text is marked and decoding goes on after it.
    """
    length = stop - start
    ends = np.cumsum(length + 1)  # where each text's newline ends
    where = np.repeat(start - (ends - length - 1), length + 1) + np.arange(ends[-1] if len(ends) else 0)
    joined = buffer[where]
    joined[ends - 1] = _LF
    data = memoryview(joined.tobytes())
    valid = np.ones(len(start), dtype=bool)
    at = 0
    while True:
        try:
            str(data[at:], "utf-8")
            return valid
        except UnicodeDecodeError as error:
            bad = int(np.searchsorted(ends, at + error.start, side="right"))
            valid[bad] = False
            at = int(ends[bad])


def _used(positions: dict[str, list[int]], joined: bool = False) -> list[int]:
    """The fields the candidate columns are made of (with `joined` ids, not the ids unless used elsewhere)."""
    keys = ("label", "texts", "extra", "split") if joined else ("label", "texts", "pair_id", "extra", "split")
    return sorted({p for key in keys for p in positions[key]})


def _joined_ids(contract: Contract, positions: dict[str, list[int]]) -> bool:
    """Whether the pair id is one span of the line with its delimiters replaced by a one-byte separator.

    True where the id columns are adjacent and in order (STS-B's 1, 2, 3; MSRP's two ids): fields
    hold no delimiter, so the span with each delimiter made the separator is the ids joined by it,
    and one string column replaces one per id and their concatenation.
    """
    ids = positions["pair_id"]
    separator = contract.columns.pair_id_separator
    return (
        len(ids) > 1
        and ids == list(range(ids[0], ids[0] + len(ids)))
        and len(separator) == 1
        and 32 <= ord(separator) < 127
    )


def _map(
    field: Callable[[int], pl.Series],
    spaced: list[np.ndarray],
    lines: np.ndarray,
    contract: Contract,
    positions: dict[str, list[int]],
    split: str | None,
    tag: str,
    pair_ids: pl.Series | None = None,
) -> tuple[pl.DataFrame, np.ndarray, int]:
    """Candidate columns of the plain lines, which of them map here, and the whitespace fixes made.

    One select over the fields the contract uses; a line whose label is not a plain finite number
    (or, with split_column, whose split value maps to no split) is left to the per-record path.
    """
    fields = pl.DataFrame(
        {
            "line": pl.Series(lines, dtype=pl.Int64),
            **{f"_f{i}": field(i) for i in _used(positions, pair_ids is not None)},
            **({} if pair_ids is None else {"_pair_id": pair_ids}),
        }
    )

    def col(i: int) -> pl.Expr:
        return pl.col(f"_f{i}")

    label_text = col(positions["label"][0]).str.strip_chars(" ")
    # polars' cast reads plain decimal numbers (to Python's float() exactly) and inf/nan spellings, which
    # the finiteness checks below leave to Python; anything else (1_000, hex...) is null: Python decides.
    number = label_text.cast(pl.Float64, strict=False)
    if split is None:
        assert contract.split_column is not None
        mapping = contract.split_column.values
        split_expr = col(positions["split"][0]).replace_strict(
            list(mapping), list(mapping.values()), default=None
        )
    else:
        split_expr = pl.lit(split)
    fields = fields.with_columns(number.alias("score_raw"), split_expr.alias("split"))
    score_raw = pl.col("score_raw")
    if contract.label.kind == "binary":
        label_ok = (score_raw == score_raw.floor()) & (score_raw.abs() <= 127)
        label = pl.when(label_ok).then(score_raw).cast(pl.Int8, strict=False)
        score = pl.lit(None, dtype=pl.Float64)
    else:
        assert contract.label.range is not None
        low, high = contract.label.range
        label_ok = score_raw.is_finite()
        label = pl.lit(None, dtype=pl.Int8)
        score = (score_raw - low) / (high - low)
    ids = [col(i) for i in positions["pair_id"]]
    if pair_ids is not None:
        pair_id = pl.col("_pair_id")
    elif ids:
        pair_id = pl.concat_str(ids, separator=contract.columns.pair_id_separator)
    else:
        pair_id = pl.concat_str([pl.col("split"), pl.lit(tag), pl.col("line").cast(pl.Utf8)], separator="-")
    texts = dict(zip(("text_a", "text_b"), (col(i) for i in positions["texts"]), strict=True))
    # Printable ASCII texts need at most whitespace cleaning: runs of spaces collapsed, ends trimmed,
    # exactly what clean_text does to them (and counted the same way: one fix per text changed).
    dirty = {f"_dirty_{name}": text.str.contains("  ", literal=True) for name, text in texts.items()}
    rows = fields.select(
        "line",
        "split",
        pair_id.alias("pair_id"),
        *(text.alias(name) for name, text in texts.items()),
        label.alias("label"),
        score.alias("score"),
        score_raw.alias("score_raw"),
        *(col(i).alias(e.name) for e, i in zip(contract.columns.extra, positions["extra"], strict=True)),
        (pl.col("split").is_not_null() & label_ok).fill_null(False).alias("_ok"),
        **dirty,
    )
    keep = rows["_ok"].to_numpy()
    fixes = 0
    cleaned = []
    for name, edges in zip(texts, spaced, strict=True):
        index = np.flatnonzero((rows[f"_dirty_{name}"].to_numpy() | edges) & keep)
        if len(index):  # rare: clean just these texts
            fixes += len(index)
            text = rows[name]
            fixed = text.gather(index).str.replace_all("  +", " ").str.strip_chars(" ")
            cleaned.append(text.clone().scatter(index, fixed))
    rows = rows.drop("_ok", *dirty)
    return (rows.with_columns(cleaned) if cleaned else rows), keep, fixes
