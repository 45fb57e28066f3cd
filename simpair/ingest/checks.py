"""The contract's row checks, run with pandera's polars backend (duplicates: `simpair.ingest.dedupe`).

pandera reports every failing row (lazy validation) instead of stopping at the first, which is what
a quarantine needs. Each failure becomes a quarantine reason; a row failing several checks is
quarantined once, with the first reason in `REASON_ORDER` and all reasons in the detail.
"""

from __future__ import annotations

import pandera.polars as pa
import polars as pl
from pandera.errors import SchemaErrors

from simpair.contracts import Contract

# Each column carries one contract check, so the failing column names the quarantine reason
# (pandera reports a check by its expression, e.g. "str_length(1, None)", not by a name we choose).
_COLUMN_REASON = {
    "text_a": "empty_text",
    "text_b": "empty_text",
    "label": "label_domain",
    "score": "score_range",
}
REASON_ORDER = ("empty_text", "label_domain", "score_range", "duplicate", "duplicate_pair_id")


def build_schema(contract: Contract) -> pa.DataFrameSchema:
    """A pandera schema from the contract's `checks` and `label` sections."""
    checks = contract.checks
    text_checks = [pa.Check.str_length(min_value=1, name="empty_text")] if checks.non_empty_texts else []
    columns: dict[str, pa.Column] = {
        "pair_id": pa.Column(pl.Utf8, nullable=False),
        "text_a": pa.Column(pl.Utf8, text_checks, nullable=False),
        "text_b": pa.Column(pl.Utf8, text_checks, nullable=False),
    }
    if contract.label.kind == "binary":
        domain = [pa.Check.isin(contract.label.values, name="label_domain")] if checks.label_domain else []
        columns["label"] = pa.Column(pl.Int8, domain, nullable=False)
    else:
        rng = [pa.Check.in_range(0.0, 1.0, name="score_range")] if checks.score_range else []
        columns["score"] = pa.Column(pl.Float64, rng, nullable=False)
    return pa.DataFrameSchema(columns, name=f"contract:{contract.dataset}")


def failing_rows(frame: pl.DataFrame, contract: Contract) -> dict[int, list[str]]:
    """Row index -> names of the contract checks it fails (pandera, lazy)."""
    schema = build_schema(contract)
    try:
        schema.validate(frame.select(list(schema.columns)), lazy=True)
    except SchemaErrors as exc:
        failures: dict[int, list[str]] = {}
        cases = exc.failure_cases
        for row in cases.iter_rows(named=True):
            index = row.get("index")
            if index is None:  # a schema-level failure (dtype): a bug in our own mapping, not in the data
                raise RuntimeError(f"contract {contract.dataset}: schema failure {row}") from exc
            check = str(row["check"])
            column = str(row["column"])
            reason = "not_nullable" if "null" in check else _COLUMN_REASON.get(column, check)
            failures.setdefault(int(index), []).append(f"{reason}:{row['column']}")
        return failures
    return {}
