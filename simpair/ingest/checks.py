"""The contract's row checks as polars expressions (duplicates: `simpair.ingest.dedupe`).

Every failing row is reported with every check it fails, which is what a quarantine needs. Each
failure becomes a quarantine reason; a row failing several checks is quarantined once, with the
first reason in `REASON_ORDER` and all failures in the detail (`describe`: each names the field, its
value and the rule, e.g. `score 7.2 outside [0, 5]`), in the order pandera's lazy validation
listed them before (columns pair_id, text_a, text_b, label or score; per column the null check
first). The checks are four comparisons, so they run as one polars select: pandera did the same
work through a schema object at about 0.1 s per call (4 s of a 2M-row ingest) plus 1.4 s of
imports. tests/test_ingest_checks.py holds the pandera schema these reproduce and compares them.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from simpair.contracts import Contract
from simpair.ingest.rows import shorten

REASON_ORDER = ("empty_text", "label_domain", "score_range", "duplicate", "duplicate_pair_id")


def check_columns(contract: Contract) -> list[tuple[str, str, pl.Expr]]:
    """(column, problem, expression true where a row fails it), in reporting order.

    Null values fail only the null check (a float NaN counts as null there, as in pandera); the
    value checks pass a null.
    """
    checks = contract.checks
    label = "label" if contract.label.kind == "binary" else "score"
    out: list[tuple[str, str, pl.Expr]] = []
    for column in ("pair_id", "text_a", "text_b", label):
        value = pl.col(column)
        null = value.is_null() | value.is_nan() if column == "score" else value.is_null()
        out.append((column, "not_nullable", null))
        if column.startswith("text_") and checks.non_empty_texts:
            out.append((column, "empty_text", value.str.len_bytes() < 1))
        elif column == "label" and checks.label_domain:
            out.append((column, "label_domain", ~value.is_in(contract.label.values)))
        elif column == "score" and checks.score_range:
            out.append((column, "score_range", ~((value >= 0.0) & (value <= 1.0))))
    return out


def failing_rows(frame: pl.DataFrame, contract: Contract) -> dict[int, list[str]]:
    """Row index -> the contract checks it fails, as "reason:column"."""
    found = check_columns(contract)
    hits = frame.select(expr.fill_null(False).alias(str(i)) for i, (_, _, expr) in enumerate(found))
    failures: dict[int, list[str]] = {}
    for i, (column, reason, _) in enumerate(found):
        for row in hits.select(pl.arg_where(pl.col(str(i)))).to_series().to_list():
            failures.setdefault(row, []).append(f"{reason}:{column}")
    return failures


def _number(value: float) -> str:
    """A number as a person writes it: 5 rather than 5.0, 7.25 as is."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def describe(problems: list[str], row: dict[str, Any], contract: Contract) -> str:
    """The detail of a row's failed checks ("reason:column", as `failing_rows` gives them): for each,
    the field, its value (shortened) and the rule, e.g. `text_b is empty; score 7.2 outside [0, 5]`.

    `row` holds the row's candidate values; a graded score is shown as in the source (`score_raw`),
    against the contract's range, since the normalised score would mean nothing to the reader.
    """
    said = []
    for problem in problems:
        reason, column = problem.split(":", 1)
        if reason == "not_nullable":
            said.append(f"{column} is missing")
        elif reason == "empty_text":
            said.append(f"{column} is empty")
        elif reason == "label_domain":
            allowed = ", ".join(str(v) for v in contract.label.values or [])
            said.append(f"label {row['label']} not in [{allowed}]")
        elif reason == "score_range":
            assert contract.label.range is not None
            low, high = contract.label.range
            raw = row["score_raw"]
            value = _number(raw) if isinstance(raw, float) else shorten(repr(raw))
            said.append(f"score {value} outside [{_number(low)}, {_number(high)}]")
        else:
            said.append(f"{column} {shorten(repr(row.get(column)))} fails {reason}")
    return "; ".join(said)
