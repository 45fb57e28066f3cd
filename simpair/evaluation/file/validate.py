"""Keep the rows of a pairs file that can be scored and judged; count every other row under its reason.

The texts follow the scoring-input contract (`text_a`/`text_b` required; null, blank or non-UTF-8
texts are dropped, never scored); the labels must be 0/1 (binary) or grades on a stated scale (graded).
Every dropped row is kept with its reason, column and value, so `dropped.parquet` shows the user what
to fix.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from simpair.evaluation.file.read import FileEvalError

LabelKind = Literal["graded", "binary"]
LABEL_KINDS: tuple[str, ...] = ("graded", "binary")
DEFAULT_LABEL_COLUMN = {"binary": "label", "graded": "score"}
TEXT_COLUMNS = ("text_a", "text_b")


@dataclass
class LabelledRows:
    """The rows that survived validation, in file order, and why the others were dropped."""

    rows: np.ndarray  # 0-based row numbers in the file
    text_a: list[str]
    text_b: list[str]
    gold_raw: np.ndarray  # labels as written in the file
    gold: np.ndarray  # binary: 0/1 ints; graded: rescaled to 0-1
    score_range: tuple[float, float] | None
    rows_read: int
    dropped: dict[str, int]
    drops: pl.DataFrame  # row, reason, column, value
    pair_id: list[Any] | None


def _check_columns_and_options(
    frame: pl.DataFrame,
    path: Path,
    label_kind: str,
    label_column: str | None,
    score_range: tuple[float, float] | None,
) -> str:
    """Refuse, naming the option to fix, what no row-by-row drop can mend; return the label column."""
    if label_kind not in LABEL_KINDS:
        raise FileEvalError(
            f"label kind must be one of {', '.join(LABEL_KINDS)}, got {label_kind!r}", "--label-kind"
        )
    column = label_column or DEFAULT_LABEL_COLUMN[label_kind]
    option = "--label-column" if label_column else "--file"
    for name in (*TEXT_COLUMNS, column):
        if name not in frame.columns:
            hint = "" if name in TEXT_COLUMNS else f" (the {label_kind} label column; --label-column NAME)"
            raise FileEvalError(
                f"{path}: missing column {name!r}{hint}; columns: {', '.join(frame.columns) or '(none)'}",
                "--file" if name in TEXT_COLUMNS else option,
            )
    if frame.height == 0:
        raise FileEvalError(f"{path}: the file has zero rows")
    if score_range is not None:
        low, high = float(score_range[0]), float(score_range[1])
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise FileEvalError(f"range must be MIN MAX with MIN < MAX, got {low} {high}", "--range")
        if label_kind != "graded":
            raise FileEvalError("--range applies to graded labels only (--label-kind graded)", "--range")
    return column


def _drops_table(
    frame: pl.DataFrame, reason: np.ndarray, where: np.ndarray, keep: np.ndarray
) -> pl.DataFrame:
    """dropped.parquet's rows: row number, reason, column and the offending cell as written."""
    bad_rows = np.flatnonzero(~keep)
    shown = [frame[str(where[r])][int(r)] for r in bad_rows]  # the offending cell, as written
    return pl.DataFrame(
        {
            "row": bad_rows.astype(np.int64),
            "reason": pl.Series(reason[~keep].tolist(), dtype=pl.String),
            "column": pl.Series(where[~keep].tolist(), dtype=pl.String),
            "value": pl.Series([None if v is None else str(v) for v in shown], dtype=pl.String),
        }
    )


def validate_pairs(
    frame: pl.DataFrame,
    path: Path,
    label_kind: str,
    label_column: str | None = None,
    score_range: tuple[float, float] | None = None,
) -> LabelledRows:
    """Keep the rows that can be scored and judged; count every dropped row under its reason.

    Reasons: `non_utf8`, `null_text`, `blank_text` (a text is unreadable, missing or only whitespace),
    `label_missing`, `label_not_numeric` (also NaN, infinity), `label_not_binary` (other than 0/1),
    `label_out_of_range` (graded labels outside --range). A graded file without --range must already
    be on 0-1: guessing the scale from the data would silently rescale a 0-5 file that tops out at 4.
    """
    column = _check_columns_and_options(frame, path, label_kind, label_column, score_range)
    texts = {name: _as_text(frame[name]) for name in TEXT_COLUMNS}
    raw_label = frame[column]
    gold_raw = raw_label.cast(pl.Float64, strict=False).to_numpy()  # not a number -> null -> NaN
    n = frame.height
    reason = np.full(n, "", dtype=object)
    where = np.full(n, "", dtype=object)

    def mark(mask: np.ndarray, why: str, col: str) -> None:
        fresh = mask & (reason == "")  # the first problem found names the row
        reason[fresh] = why
        where[fresh] = col

    for name in TEXT_COLUMNS:
        values, written = texts[name], frame[name].is_null().to_numpy()
        mark(values.is_null().to_numpy() & ~written, "non_utf8", name)  # bytes that are no text
        mark(written, "null_text", name)
        mark((values.str.strip_chars().str.len_chars() == 0).fill_null(False).to_numpy(), "blank_text", name)
    mark(raw_label.is_null().to_numpy(), "label_missing", column)
    mark(~np.isfinite(gold_raw), "label_not_numeric", column)  # text, NaN or infinity (nulls marked above)
    valid = np.nan_to_num(gold_raw, nan=0.0, posinf=0.0, neginf=0.0)  # only rows already marked change
    if label_kind == "binary":
        mark(~np.isin(valid, (0.0, 1.0)), "label_not_binary", column)
    else:
        if score_range is None:
            usable = valid[reason == ""]
            if usable.size and (usable.min() < 0.0 or usable.max() > 1.0):
                raise FileEvalError(
                    f"{path}: column {column!r} spans {usable.min():g} to {usable.max():g}, not 0-1: "
                    "pass the scale it is written on, e.g. --range 0 5",
                    "--range",
                )
            score_range = (0.0, 1.0)
        low, high = score_range
        mark((valid < low) | (valid > high), "label_out_of_range", column)

    keep = reason == ""
    dropped = dict(sorted(Counter(reason[~keep].tolist()).items()))
    drops = _drops_table(frame, reason, where, keep)
    if not keep.any():
        raise FileEvalError(f"{path}: none of its {n} rows can be evaluated ({describe_drops(dropped)})")
    kept_raw = gold_raw[keep]
    if label_kind == "binary":
        gold = kept_raw.astype(np.int64)
    else:
        low, high = score_range  # type: ignore[misc]
        gold = (kept_raw - low) / (high - low)
    mask = pl.Series(keep)
    pair_id = frame["pair_id"].filter(mask).to_list() if "pair_id" in frame.columns else None
    return LabelledRows(
        rows=np.flatnonzero(keep).astype(np.int64),
        text_a=texts["text_a"].filter(mask).to_list(),
        text_b=texts["text_b"].filter(mask).to_list(),
        gold_raw=kept_raw,
        gold=gold,
        score_range=score_range if label_kind == "graded" else None,
        rows_read=n,
        dropped=dropped,
        drops=drops,
        pair_id=pair_id,
    )


def _as_text(column: pl.Series) -> pl.Series:
    """Strings as they are; bytes decoded as UTF-8, null where they are not (polars' cast would raise)."""
    if column.dtype != pl.Binary:
        return column.cast(pl.String, strict=False)

    def decode(raw: bytes | None) -> str | None:
        try:
            return None if raw is None else raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    return pl.Series(column.name, [decode(v) for v in column.to_list()], dtype=pl.String)


def describe_drops(dropped: dict[str, int]) -> str:
    return ", ".join(f"{count} {why}" for why, count in dropped.items()) or "none dropped"


def drop_rows(data: LabelledRows, mask: np.ndarray, reason: str) -> LabelledRows:
    """The same rows less those in `mask`, each recorded in the drops table under `reason`."""
    keep = ~mask
    added = pl.DataFrame(
        {
            "row": data.rows[mask],
            "reason": [reason] * int(mask.sum()),
            "column": ["text_a+text_b"] * int(mask.sum()),
            "value": [a for a, m in zip(data.text_a, mask, strict=True) if m],
        },
        schema=data.drops.schema,
    )
    dropped = dict(data.dropped)
    dropped[reason] = dropped.get(reason, 0) + int(mask.sum())
    return LabelledRows(
        rows=data.rows[keep],
        text_a=[t for t, k in zip(data.text_a, keep, strict=True) if k],
        text_b=[t for t, k in zip(data.text_b, keep, strict=True) if k],
        gold_raw=data.gold_raw[keep],
        gold=data.gold[keep],
        score_range=data.score_range,
        rows_read=data.rows_read,
        dropped=dict(sorted(dropped.items())),
        drops=pl.concat([data.drops, added]).sort("row"),
        pair_id=None if data.pair_id is None else [p for p, k in zip(data.pair_id, keep, strict=True) if k],
    )
