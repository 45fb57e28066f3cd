"""Typing of `columns.extra`: other source columns kept beside the pair as typed Parquet columns.

Values arrive as text (delimited files) or as the text of typed values (parquet/jsonl), and are typed
once over the clean rows of every split together, so train, dev and test get the same column types.
Blank values are null. With an explicit type a value that does not parse is the row's quarantine
reason (`bad_extra`); with `auto` nothing fails: the type is the narrowest that fits every value.
"""

from __future__ import annotations

import polars as pl

from simpair.contracts import ExtraColumn

_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}
DTYPES: dict[str, pl.DataType] = {
    "string": pl.Utf8(),
    "int": pl.Int64(),
    "float": pl.Float64(),
    "bool": pl.Boolean(),
}


def _parse(values: pl.Series, kind: str) -> pl.Series:
    """Values parsed as `kind`; a value that does not parse becomes null (compared with the input later)."""
    text = values.str.strip_chars()
    if kind == "string":
        return text
    if kind == "int":
        return text.str.to_integer(strict=False).cast(pl.Int64)
    if kind == "float":
        return text.cast(pl.Float64, strict=False)
    lower = text.str.to_lowercase()
    return (
        pl.when(lower.is_in(list(_TRUE)))
        .then(True)
        .when(lower.is_in(list(_FALSE)))
        .then(False)
        .otherwise(None)
        .alias(values.name)
        .pipe(lambda expr: pl.select(expr).to_series())
    )


def _auto(values: pl.Series) -> str:
    present = values.str.strip_chars().drop_nulls()
    for kind in ("int", "float"):
        if present.len() and _parse(present, kind).null_count() == 0:
            return kind
    lower = present.str.to_lowercase()
    if present.len() and lower.is_in(["true", "false"]).all():
        return "bool"
    return "string"


def type_extra(spec: ExtraColumn, values: pl.Series) -> tuple[pl.Series, list[int], str]:
    """(typed column, row indexes whose value does not parse, the type chosen)."""
    blank = values.str.strip_chars().fill_null("") == ""
    values = pl.select(pl.when(blank).then(None).otherwise(values).alias(spec.name)).to_series()
    kind = _auto(values) if spec.type == "auto" else spec.type
    typed = _parse(values, kind).alias(spec.name)
    bad = (typed.is_null() & values.is_not_null()).arg_true().to_list()
    return typed.cast(DTYPES[kind]), bad, kind
