"""Turn data records into candidate pairs (mapped, cleaned, label parsed) or quarantine entries.

Structural problems (wrong field count, undecodable bytes, a label that is not a number) are
decided here, because after them there is no row to check. Content rules (non-empty texts, label
domain, score range, unique ids, duplicates) are left to `checks.py`, which applies the contract.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from simpair.contracts import ColumnRef, Contract
from simpair.ingest.clean import CleanStats, clean_text
from simpair.ingest.reader import RawRecord, SourceFileError


@dataclass
class Rejected:
    line: int
    raw: str
    reason: str
    detail: str


@dataclass
class Candidates:
    """Columnar candidate rows of one split file, plus the records rejected before checks."""

    line: list[int] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    pair_id: list[str] = field(default_factory=list)
    text_a: list[str] = field(default_factory=list)
    text_b: list[str] = field(default_factory=list)
    label: list[int | None] = field(default_factory=list)
    score: list[float | None] = field(default_factory=list)
    score_raw: list[float | None] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    clean_stats: CleanStats = field(default_factory=CleanStats)


def resolve_columns(contract: Contract, header: list[str] | None, path: Path) -> dict[str, list[int]]:
    """Column refs -> 0-based positions; a named column missing from the header fails the file."""

    def position(ref: ColumnRef) -> int:
        if isinstance(ref, int):
            return ref
        assert header is not None  # the contract model forbids names without a header
        if ref not in header:
            raise SourceFileError(f"{path}: expected a column named {ref!r} in the header, found {header}")
        return header.index(ref)

    cols = contract.columns
    return {
        "text_a": [position(cols.text_a)],
        "text_b": [position(cols.text_b)],
        "label": [position(cols.label)],
        "pair_id": [position(r) for r in cols.pair_id_columns()],
    }


def _parse_label(value: str, contract: Contract) -> tuple[int | None, float | None, float | None, str | None]:
    """(label, score, score_raw, error). Range and domain are checked later, against the contract."""
    text = value.strip()
    if contract.label.kind == "binary":
        try:
            number = float(text)
        except ValueError:
            return None, None, None, f"label {text!r} is not a number"
        if not number.is_integer() or abs(number) > 127:
            return None, None, None, f"label {text!r} is not a small integer"
        return int(number), None, number, None
    try:
        raw = float(text)
    except ValueError:
        return None, None, None, f"score {text!r} is not a number"
    if not math.isfinite(raw):
        return None, None, None, f"score {text!r} is not finite"
    assert contract.label.range is not None
    low, high = contract.label.range
    return None, (raw - low) / (high - low), raw, None


def build_candidates(
    records: list[RawRecord], contract: Contract, positions: dict[str, list[int]], split: str
) -> Candidates:
    """Map every record to a candidate row or a rejection; the two together cover all records."""
    out = Candidates()
    allowed = set(contract.format.field_counts)
    sep = contract.columns.pair_id_separator
    label_reason = "bad_label" if contract.label.kind == "binary" else "bad_score"
    for rec in records:
        if rec.error is not None:
            out.rejected.append(Rejected(rec.line, rec.raw, *rec.error))
            continue
        assert rec.fields is not None
        if rec.raw.strip() == "":
            out.rejected.append(Rejected(rec.line, rec.raw, "empty_line", "blank data line"))
            continue
        if len(rec.fields) not in allowed:
            expected = " or ".join(map(str, sorted(allowed)))
            out.rejected.append(
                Rejected(
                    rec.line, rec.raw, "field_count", f"expected {expected} fields, found {len(rec.fields)}"
                )
            )
            continue
        f = rec.fields
        label, score, score_raw, error = _parse_label(f[positions["label"][0]], contract)
        if error is not None:
            out.rejected.append(Rejected(rec.line, rec.raw, label_reason, error))
            continue
        ids = [f[i].strip() for i in positions["pair_id"]]
        out.line.append(rec.line)
        out.raw.append(rec.raw)
        out.pair_id.append(sep.join(ids) if ids else f"{split}-{rec.line}")
        out.text_a.append(clean_text(f[positions["text_a"][0]], out.clean_stats))
        out.text_b.append(clean_text(f[positions["text_b"][0]], out.clean_stats))
        out.label.append(label)
        out.score.append(score)
        out.score_raw.append(score_raw)
    return out
