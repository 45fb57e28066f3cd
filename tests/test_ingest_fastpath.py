"""The vectorised path decides a line only where that gives exactly what the per-record path gives: texts
with non-ASCII UTF-8 only when cleaning could change just their spaces, labels only when they are plain
finite numbers. The same candidate rows (texts, ids, labels, raw lines) and the same cleaning counts;
the oracle is the per-record code itself (`decode_pieces` + `build_candidates`) over every line.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

import numpy as np
import polars as pl
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simpair.contracts import Contract
from simpair.ingest import fastpath
from simpair.ingest.batches import candidates_frame
from simpair.ingest.chunktask import _plain_record
from simpair.ingest.clean import _CONTROL_RE, _WHITESPACE_RE, ODD_CHARACTERS
from simpair.ingest.fastpath import _valid_utf8
from simpair.ingest.reader import decode_pieces
from simpair.ingest.rows import build_candidates, resolve_columns

CONTRACT = Contract.model_validate(
    yaml.safe_load("""
dataset: u
contract_version: "1"
format: {delimiter: "\\t", quoting: none, header: false, field_counts: [4]}
files:
  - {split: train, role: train, pattern: "train*"}
  - {split: test, role: test, pattern: "test*"}
columns: {pair_id: 0, label: 1, text_a: 2, text_b: 3}
label: {kind: binary, values: [0, 1]}
""")
)
COLUMNS = ["line", "pair_id", "text_a", "text_b", "label", "raw"]


def _per_record(lines: list[bytes], first: int = 1) -> tuple[pl.DataFrame, Counter[str]]:
    fmt = CONTRACT.format
    decoded = decode_pieces(lines, fmt, Counter())
    records = [_plain_record(first + i, text, ok, "\t", "utf-8") for i, (text, ok) in enumerate(decoded)]
    cand = build_candidates(records, CONTRACT, resolve_columns(CONTRACT, None, "x"), "train", "t")
    return candidates_frame(cand, CONTRACT).select(COLUMNS), cand.clean_stats.counts


def _both_paths(lines: list[bytes]) -> tuple[pl.DataFrame, Counter[str], int]:
    """Rows and cleaning counts as ingest makes them (vectorised, flagged lines per record); flagged count."""
    positions = resolve_columns(CONTRACT, None, "x")
    fast = fastpath.parse_chunk(b"\n".join(lines) + b"\n", 1, CONTRACT, positions, "train", "t")
    flagged = [raw for _, raw in fast.flagged]
    flagged_rows, counts = (
        _per_record(flagged, 1)
        if flagged
        else (pl.DataFrame(schema=fast.rows.select(COLUMNS).schema), Counter[str]())
    )
    if flagged:  # per-record line numbers of the flagged lines, not 1..k
        numbers = pl.Series("line", [n for n, _ in fast.flagged])
        flagged_rows = flagged_rows.with_columns(numbers.gather(flagged_rows["line"] - 1))
    counts["whitespace_fixes"] += fast.whitespace_fixes
    rows = pl.concat([fast.rows.select(COLUMNS), flagged_rows.cast(fast.rows.select(COLUMNS).schema)])
    return rows.sort("line"), +counts, len(flagged)


def _same(lines: list[bytes]) -> int:
    rows, counts, flagged = _both_paths(lines)
    want_rows, want_counts = _per_record(lines)
    assert rows.equals(want_rows.cast(rows.schema).sort("line"))
    assert counts == +want_counts
    return flagged


def test_plain_unicode_texts_stay_on_the_vectorised_path() -> None:
    texts = [
        "café crème",
        "they don’t know",
        "“quoted”",
        "naïve  spaces ",
        "中文句子",
        "emoji 🙂 ok",
        "Ångström",
    ]
    lines = [f"{i}\t1\t{t}\tplain text".encode() for i, t in enumerate(texts)]
    assert _same(lines) == 0


def test_texts_cleaning_may_change_go_to_the_per_record_path() -> None:
    odd = [
        "they don‚Äôt",  # mojibake
        "cafe\u0301",  # not NFC
        "no\u00a0break",  # non-ASCII whitespace
        "line\u2028separator",
        "\ufeffbom inside",
        "c1 control \u0085",
        "ideographic\u3000space",
    ]
    lines = [f"{i}\t1\t{t}\tplain".encode() for i, t in enumerate(odd)]
    lines.append(b"99\t0\tbroken \xff\xfe utf-8\tplain")
    lines.append("100\t1\tplain\tcafé".encode())  # stays
    assert _same(lines) == len(odd) + 1


def test_non_ascii_outside_the_texts_goes_to_the_per_record_path() -> None:
    lines = ["é1\t1\tcafé\tx".encode(), "2\t١\tcafé\tx".encode(), "3\t1\tcafé\tx".encode()]
    assert _same(lines) == 2


def test_the_character_class_is_what_clean_text_removes_or_treats_as_space_past_ascii() -> None:
    pattern = re.compile(ODD_CHARACTERS)
    chars = [chr(code) for code in range(0x80, 0x110000) if not 0xD800 <= code < 0xE000]
    for char in chars:
        changed = bool(_CONTROL_RE.match(char) or _WHITESPACE_RE.match(char)) or char.strip() != char
        assert bool(pattern.match(char)) == changed, hex(ord(char))
    values = pl.Series(chars)  # polars reads the class as Python does
    assert values.str.contains(ODD_CHARACTERS).to_list() == [bool(pattern.match(c)) for c in chars]


def test_polars_keeps_no_single_character_python_would_normalise() -> None:
    """The direction `_plain_unicode` relies on: where polars leaves a character as it is, so does Python."""
    chars = [chr(code) for code in range(0x80, 0x110000) if not 0xD800 <= code < 0xE000]
    same = (pl.Series(chars).str.normalize("NFC") == pl.Series(chars)).to_list()
    assert not [
        hex(ord(c))
        for c, kept in zip(chars, same, strict=True)
        if kept and unicodedata.normalize("NFC", c) != c
    ]


_awkward = st.sampled_from(
    list("ab  é’“”\u00a0\u0301\u2028\u3000\ufeff\u0085中🙂")
    + ["‚Äô", "e\u0301", "\u00e9", "\u212b", "\uff21"]
)
_any = st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r")
_text = st.lists(st.one_of(_awkward, _any), max_size=10).map("".join)


@given(pairs=st.lists(st.tuples(_text, _text), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_texts_give_the_per_record_rows_and_counts(pairs: list[tuple[str, str]]) -> None:
    _same([f"{i}\t{i % 2}\t{a}\t{b}".encode() for i, (a, b) in enumerate(pairs)])


_label = st.one_of(
    st.sampled_from(
        ["0", "1", "1.0", "+1", "-0", ".5", "5.", "1e0", "inf", "nan", "1_0", "0x1", "", "١", "1e400"]
    ),
    st.text(alphabet="0123456789.eE+-xinfa_ ", max_size=6),
)


@given(labels=st.lists(_label, min_size=1, max_size=20))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_labels_give_the_per_record_rows_and_counts(labels: list[str]) -> None:
    _same([f"{i}\t{label}\tsome text {i}\tother text".encode() for i, label in enumerate(labels)])


@given(pieces=st.lists(st.binary(max_size=12), min_size=1, max_size=30))
@settings(max_examples=300, deadline=None)
def test_utf8_validity_is_pythons(pieces: list[bytes]) -> None:
    seeds = [
        b"\xc3\xa9",
        b"\xe2\x80\x99",
        b"\xed\xa0\x80",
        b"\xc0\xaf",
        b"\xf0\x9f\x99\x82",
        b"\xf4\x90\x80\x80",
    ]
    pieces = [p + seeds[i % len(seeds)][: i % 4] for i, p in enumerate(pieces)]  # whole and cut sequences
    buffer = np.frombuffer(b"".join(pieces) + b"\0" * 16, dtype=np.uint8)
    stop = np.cumsum([len(p) for p in pieces])
    start = stop - [len(p) for p in pieces]

    def valid(piece: bytes) -> bool:
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    assert _valid_utf8(buffer, start, stop).tolist() == [valid(p) for p in pieces]
