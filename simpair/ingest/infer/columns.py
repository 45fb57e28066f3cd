"""The sample as columns: each column's values and what they look like (numeric, free text, unique, few).

These traits are what `roles.py` reads to decide which column is a text, the label, the split or the id.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simpair.contracts import ColumnRef
from simpair.ingest.rows import as_text

# A column is numeric when this share of its non-empty sampled values are numbers: a label column with
# a stray `n/a` stays the label (ingest quarantines that row), while a text column is far below it.
NUMERIC_SHARE = 0.9
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def as_number(value: Any) -> float | None:
    """The finite number a cell holds (a number, a bool or numeric text), else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        number = float(value.strip())
        return number if math.isfinite(number) else None
    return None


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass
class Column:
    """One column's sampled values and what they look like."""

    ref: ColumnRef
    position: int
    values: list[Any]
    lines: list[int] | None = None  # the line (or Parquet row) of each value, 1-based, when known
    present: list[Any] = field(init=False)
    numbers: list[float] = field(init=False)
    strings: list[str] = field(init=False)
    distinct: set[str] = field(init=False)
    mean_length: float = field(init=False)

    def __post_init__(self) -> None:
        self.present = [v for v in self.values if not _is_empty(v)]
        self.numbers = [n for n in (as_number(v) for v in self.present) if n is not None]
        self.strings = [v for v in self.present if isinstance(v, str)]
        self.distinct = {as_text(v).strip() for v in self.present}
        lengths = [len(as_text(v)) for v in self.present]
        self.mean_length = sum(lengths) / len(lengths) if lengths else 0.0

    @property
    def label(self) -> str:
        return repr(self.ref) if isinstance(self.ref, str) else f"position {self.ref}"

    @property
    def numeric(self) -> bool:
        """Mostly numbers: a label candidate. A few other values (`n/a`, `?`) are what ingest quarantines."""
        return bool(self.present) and len(self.numbers) >= NUMERIC_SHARE * len(self.present)

    def not_numbers(self) -> list[tuple[int | None, str]]:
        """(line or None, value) of the present values that do not parse as a number, in sample order."""
        lines = self.lines if self.lines is not None else [None] * len(self.values)
        return [
            (line, as_text(v).strip())
            for line, v in zip(lines, self.values, strict=True)
            if not _is_empty(v) and as_number(v) is None
        ]

    @property
    def integers(self) -> bool:
        return self.numeric and all(n.is_integer() for n in self.numbers)

    @property
    def textual(self) -> bool:
        """Mostly non-numeric strings: a text candidate."""
        return (
            bool(self.present)
            and len(self.strings) >= 0.9 * len(self.present)
            and len(self.numbers) < 0.5 * len(self.present)
        )

    @property
    def unique(self) -> bool:
        texts = [as_text(v).strip() for v in self.values]
        return bool(texts) and all(texts) and len(set(texts)) == len(texts)

    @property
    def id_like(self) -> bool:
        if not self.unique:
            return False
        if self.integers:
            return True
        return all(
            isinstance(v, str) and len(v) <= 64 and not re.search(r"\s", v.strip()) for v in self.values
        )

    @property
    def low_cardinality(self) -> bool:
        n = len(self.present)
        return bool(self.present) and len(self.distinct) <= max(2, min(20, n // 2))

    def example(self) -> str:
        shown = next((as_text(v).strip() for v in self.present), "")
        return shown if len(shown) <= 30 else shown[:27] + "..."


def table_of_records(
    records: list[list[str]], names: list[str] | None, width: int, lines: list[int] | None = None
) -> list[Column]:
    """Columns of delimited records: named by the header where a name is present and unique."""
    columns = []
    for i in range(width):
        ref: ColumnRef = i
        if names is not None and i < len(names) and names[i] and names.count(names[i]) == 1:
            ref = names[i]
        columns.append(Column(ref, i, [r[i] if len(r) > i else None for r in records], lines))
    return columns


def table_of_objects(rows: Sequence[dict[str, Any]], lines: list[int] | None = None) -> list[Column]:
    """Columns of JSON or Parquet rows, one per key in order of first appearance."""
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    return [Column(key, i, [row.get(key) for row in rows], lines) for i, key in enumerate(keys)]
