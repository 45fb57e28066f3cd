"""The row checks in polars give exactly what pandera's lazy validation of the same schema gave.

The schema below is the one ingest validated with pandera until the checks became one polars select;
every combination of null, empty, in-range and out-of-range values, under every switch of the
contract's checks, must fail the same rows with the same problems in the same order.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pandera.polars as pa
import polars as pl
import pytest
import yaml
from ingest_helpers import TOY_CONTRACT
from pandera.errors import SchemaErrors

from simpair.contracts import Contract
from simpair.ingest import checks

_COLUMN_REASON = {
    "text_a": "empty_text",
    "text_b": "empty_text",
    "label": "label_domain",
    "score": "score_range",
}


def _pandera_schema(contract: Contract) -> pa.DataFrameSchema:
    c = contract.checks
    text_checks = [pa.Check.str_length(min_value=1, name="empty_text")] if c.non_empty_texts else []
    columns: dict[str, pa.Column] = {
        "pair_id": pa.Column(pl.Utf8, nullable=False),
        "text_a": pa.Column(pl.Utf8, text_checks, nullable=False),
        "text_b": pa.Column(pl.Utf8, text_checks, nullable=False),
    }
    if contract.label.kind == "binary":
        domain = [pa.Check.isin(contract.label.values, name="label_domain")] if c.label_domain else []
        columns["label"] = pa.Column(pl.Int8, domain, nullable=False)
    else:
        rng = [pa.Check.in_range(0.0, 1.0, name="score_range")] if c.score_range else []
        columns["score"] = pa.Column(pl.Float64, rng, nullable=False)
    return pa.DataFrameSchema(columns)


def _pandera_failing(frame: pl.DataFrame, contract: Contract) -> dict[int, list[str]]:
    schema = _pandera_schema(contract)
    try:
        schema.validate(frame.select(list(schema.columns)), lazy=True)
    except SchemaErrors as exc:
        out: dict[int, list[str]] = {}
        for row in exc.failure_cases.iter_rows(named=True):
            check, column = str(row["check"]), str(row["column"])
            reason = "not_nullable" if "null" in check else _COLUMN_REASON.get(column, check)
            out.setdefault(int(row["index"]), []).append(f"{reason}:{column}")
        return out
    return {}


def _contract(kind: str, **switches: bool) -> Contract:
    raw = yaml.safe_load(TOY_CONTRACT)
    if kind == "graded":
        raw["label"] = {"kind": "graded", "range": [0, 5]}
    return Contract.model_validate({**raw, "checks": switches})


def _frame(seed: int, n: int) -> pl.DataFrame:
    rng = random.Random(seed)
    texts = [None, "", "a", "b c"]
    scores = [None, 0.0, 1.0, 0.5, -0.1, 1.2, float("nan"), float("inf")]
    return pl.DataFrame(
        {
            "pair_id": [rng.choice([None, "", "x", "y"]) for _ in range(n)],
            "text_a": [rng.choice(texts) for _ in range(n)],
            "text_b": [rng.choice(texts) for _ in range(n)],
            "label": pl.Series([rng.choice([None, 0, 1, 2, -1]) for _ in range(n)], dtype=pl.Int8),
            "score": [rng.choice(scores) for _ in range(n)],
        }
    )


@pytest.mark.parametrize("kind", ["binary", "graded"])
def test_polars_checks_equal_pandera(kind: str) -> None:
    frame = _frame(7, 400)
    for on in itertools.product([True, False], repeat=3):
        contract = _contract(kind, non_empty_texts=on[0], label_domain=on[1], score_range=on[2])
        expected = _pandera_failing(frame, contract)
        assert expected  # the grid holds failures of every kind
        got = checks.failing_rows(frame, contract)
        assert got == expected
        assert [list(got[k]) for k in sorted(got)] == [expected[k] for k in sorted(expected)]


def test_ingest_does_not_import_pandera() -> None:
    """The checks cost no pandera import (about 1.4 s of every ingest process before)."""
    code = "import sys, simpair.ingest.pipeline; print('pandera' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
