"""Turn data records into candidate pairs (mapped, cleaned, label parsed) or quarantine entries.

Structural problems (wrong field count, undecodable bytes, a label that is not a number, a text pair
that does not split in two, a split value that maps to no split) are decided here, because after them
there is no row to check. Content rules (non-empty texts, label domain, score range, unique ids,
duplicates) are left to `checks.py`, which applies the contract.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from simpair.contracts import ColumnRef, Contract
from simpair.ingest.clean import CleanStats, clean_text
from simpair.ingest.reader import RawRecord, SourceFileError


@dataclass
class Rejected:
    line: int
    raw: str
    reason: str
    detail: str
    split: str | None  # None when the record's split cannot be known (split_column unreadable or unmapped)


@dataclass
class Candidates:
    """Columnar candidate rows of one file, plus the records rejected before checks."""

    line: list[int] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    split: list[str] = field(default_factory=list)
    pair_id: list[str] = field(default_factory=list)
    text_a: list[str] = field(default_factory=list)
    text_b: list[str] = field(default_factory=list)
    label: list[int | None] = field(default_factory=list)
    score: list[float | None] = field(default_factory=list)
    score_raw: list[float | None] = field(default_factory=list)
    extra: dict[str, list[str | None]] = field(default_factory=dict)  # typed later, over all splits
    rejected: list[Rejected] = field(default_factory=list)
    clean_stats: CleanStats = field(default_factory=CleanStats)


def resolve_columns(contract: Contract, header: list[str] | None, name: str) -> dict[str, list[int]]:
    """Column refs -> 0-based positions; a named column missing from the header fails the file."""

    def position(ref: ColumnRef) -> int:
        if isinstance(ref, int):
            return ref
        assert header is not None  # the contract model forbids names without a header
        if ref not in header:
            raise SourceFileError(f"{name}: expected a column named {ref!r} in the header, found {header}")
        return header.index(ref)

    cols = contract.columns
    texts = [position(r) for r in cols.text_refs()]
    if len(texts) == 2 and texts[0] == texts[1]:
        raise SourceFileError(
            f"{name}: text_a ({cols.text_a!r}) and text_b ({cols.text_b!r}) are the same column {texts[0]}; "
            "each text needs its own column (for two texts in one field use columns.text_pair)"
        )
    split_column = contract.split_column
    return {
        "texts": texts,
        "label": [position(cols.label)],
        "pair_id": [position(r) for r in cols.pair_id_columns()],
        "extra": [position(e.source) for e in cols.extra],
        "split": [] if split_column is None else [position(split_column.column)],
    }


def as_text(value: Any) -> str:
    """A field as text: delimited fields are text already; parquet/jsonl values may be typed or null."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def shorten(text: str, limit: int = 40) -> str:
    """`text` cut to `limit` characters, ending in `…` where cut: quarantine details quote values so."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse_label(value: Any, contract: Contract) -> tuple[int | None, float | None, float | None, str | None]:
    """(label, score, score_raw, error). Range and domain are checked later, against the contract."""
    name = "label" if contract.label.kind == "binary" else "score"
    if value is None:
        return None, None, None, f"{name} is missing (null)"
    if isinstance(value, bool):
        value = int(value)
    text = as_text(value).strip()
    shown = shorten(text)
    if contract.label.kind == "binary":
        try:
            number = float(text)
        except ValueError:
            return None, None, None, f"label {shown!r} is not a number"
        if not number.is_integer() or abs(number) > 127:
            return None, None, None, f"label {shown!r} is not a small integer"
        return int(number), None, number, None
    try:
        raw = float(text)
    except ValueError:
        return None, None, None, f"score {shown!r} is not a number"
    if not math.isfinite(raw):
        return None, None, None, f"score {shown!r} is not finite"
    assert contract.label.range is not None
    low, high = contract.label.range
    return None, (raw - low) / (high - low), raw, None


def _split_pair(value: Any, column: ColumnRef, separator: str) -> tuple[str, str] | str:
    """The two texts of a one-field pair, or the reason it is not a pair (the field, its value, the rule)."""
    whole = as_text(value).strip()
    parts = whole.split(separator)
    texts = [p.strip() for p in parts]
    if len(parts) != 2 or not all(texts):
        found = f"{len(parts)} part(s)" + ("" if all(texts) else ", some empty")
        return (
            f"{column} {shorten(whole)!r}: expected exactly 2 non-empty texts separated by {separator!r}, "
            f"found {found}"
        )
    return parts[0], parts[1]


def build_candidates(
    records: list[RawRecord],
    contract: Contract,
    positions: dict[str, list[int]],
    split: str | None,
    file_tag: str,
) -> Candidates:
    """Map every record to a candidate row or a rejection; the two together cover all records.

    `split` is the split of every record of the file, or None when `split_column` assigns it per row.
    `file_tag` names the file in default pair ids (`<split>-<file_tag>-<line>`), so ids stay unique
    across the files of a split.
    """
    out = Candidates(extra={e.name: [] for e in contract.columns.extra})
    fmt = contract.format
    allowed = set(fmt.field_counts) if fmt.field_counts is not None else None
    sep = contract.columns.pair_id_separator
    label_reason = "bad_label" if contract.label.kind == "binary" else "bad_score"
    text_pair = contract.columns.text_pair
    mapping = contract.split_column.values if contract.split_column is not None else {}
    extra_names = list(out.extra)
    for rec in records:
        if rec.error is not None:
            out.rejected.append(Rejected(rec.line, rec.raw, *rec.error, split))
            continue
        assert rec.fields is not None
        if rec.raw.strip() == "":
            out.rejected.append(Rejected(rec.line, rec.raw, "empty_line", "blank data line", split))
            continue
        if allowed is not None and len(rec.fields) not in allowed:
            expected = " or ".join(map(str, sorted(allowed)))
            detail = f"expected {expected} fields, found {len(rec.fields)}"
            out.rejected.append(Rejected(rec.line, rec.raw, "field_count", detail, split))
            continue
        f = rec.fields
        row_split = split
        if row_split is None:
            value = as_text(f[positions["split"][0]]).strip()
            row_split = mapping.get(value)
            if row_split is None:
                assert contract.split_column is not None
                detail = (
                    f"{contract.split_column.column} {shorten(value)!r} maps to no split "
                    f"(split_column.values: {', '.join(mapping)})"
                )
                out.rejected.append(Rejected(rec.line, rec.raw, "unmapped_split", detail, None))
                continue
        label, score, score_raw, error = _parse_label(f[positions["label"][0]], contract)
        if error is not None:
            out.rejected.append(Rejected(rec.line, rec.raw, label_reason, error, row_split))
            continue
        if text_pair is not None:
            pair = _split_pair(f[positions["texts"][0]], text_pair.column, text_pair.separator)
            if isinstance(pair, str):
                out.rejected.append(Rejected(rec.line, rec.raw, "text_pair", pair, row_split))
                continue
            text_a, text_b = pair
        else:
            text_a, text_b = (as_text(f[i]) for i in positions["texts"])
        ids = [as_text(f[i]).strip() for i in positions["pair_id"]]
        out.line.append(rec.line)
        out.raw.append(rec.raw)
        out.split.append(row_split)
        out.pair_id.append(sep.join(ids) if ids else f"{row_split}-{file_tag}-{rec.line}")
        out.text_a.append(clean_text(text_a, out.clean_stats))
        out.text_b.append(clean_text(text_b, out.clean_stats))
        out.label.append(label)
        out.score.append(score)
        out.score_raw.append(score_raw)
        for name, i in zip(extra_names, positions["extra"], strict=True):
            out.extra[name].append(None if f[i] is None else as_text(f[i]))
    return out
