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
    typing = AutoType()
    typing.update(values)
    return typing.kind()


class AutoType:
    """The narrowest type that fits every value seen, updated batch by batch (blank values are null)."""

    def __init__(self) -> None:
        self.present = 0
        self.fits = {"int": True, "float": True, "bool": True}

    def update(self, values: pl.Series) -> None:
        present = _blank_to_null(values).str.strip_chars().drop_nulls()
        if not present.len():
            return
        self.present += present.len()
        for kind in ("int", "float"):
            if self.fits[kind] and _parse(present, kind).null_count():
                self.fits[kind] = False
        if self.fits["bool"] and not present.str.to_lowercase().is_in(["true", "false"]).all():
            self.fits["bool"] = False

    def kind(self) -> str:
        if self.present:
            for kind in ("int", "float", "bool"):
                if self.fits[kind]:
                    return kind
        return "string"


def _blank_to_null(values: pl.Series) -> pl.Series:
    blank = values.str.strip_chars().fill_null("") == ""
    return pl.select(pl.when(blank).then(None).otherwise(values).alias(values.name)).to_series()


def type_extra(
    spec: ExtraColumn, values: pl.Series, kind: str | None = None
) -> tuple[pl.Series, pl.Series, str]:
    """(typed column, mask of the rows whose value does not parse, the type chosen).

    `kind` is the type already chosen over every split (see `AutoType`); without it, `auto` is
    decided over `values` alone.
    """
    values = _blank_to_null(values).alias(spec.name)
    if kind is None:
        kind = _auto(values) if spec.type == "auto" else spec.type
    typed = _parse(values, kind).alias(spec.name)
    bad = typed.is_null() & values.is_not_null()
    return typed.cast(DTYPES[kind]), bad, kind
