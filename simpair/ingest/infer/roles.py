"""Which sampled column plays which role: split, texts, label, pair id, extras.

The two texts may also be one cell holding both; the label's kind (binary or graded) is read here too.

Every rule reads column traits (`columns.Column`) and names; a choice the sample cannot settle is not
hidden but reported as a review note.
"""

from __future__ import annotations

import math
import re
from typing import Any

from simpair.ingest.infer.columns import Column

LABEL_NAME = re.compile(r"label|score|duplicate|quality|relatedness|similarity|gold|rating|paraphrase", re.I)
CLASS_NAME = re.compile(r"label|class|category|judg|entail|gold", re.I)
NLI_VALUES = frozenset({"entailment", "neutral", "contradiction", "non_entailment", "not_entailment"})
_SPLIT_NAME = re.compile(r"split|set|fold|partition|subset", re.I)
_SPLIT_OF = (
    (re.compile(r"^train(ing)?$"), "train"),
    (re.compile(r"^(trial|dev|development|val|valid.*)$"), "dev"),
    (re.compile(r"^test(ing)?$"), "test"),
)
SPLIT_ORDER = ("train", "dev", "test")
_EXTRA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CANONICAL = frozenset(
    {"pair_id", "text_a", "text_b", "label", "score", "score_raw", "split", "dataset", "dataset_version",
     "source_file", "source_sha256", "source_line"}
)  # fmt: skip


def split_of(value: str) -> str | None:
    """The split a value names (`training` -> train, `validation` -> dev), if any."""
    for pattern, split in _SPLIT_OF:
        if pattern.match(value.strip().lower()):
            return split
    return None


def split_column(columns: list[Column]) -> Column | None:
    """A text column whose few values all name splits (two or more, or one under a split-like name)."""
    for column in columns:
        if not column.textual or not column.distinct or len(column.distinct) > 5:
            continue
        if not all(split_of(v) for v in column.distinct):
            continue
        named = isinstance(column.ref, str) and bool(_SPLIT_NAME.search(column.ref))
        if len(column.distinct) >= 2 or named:
            return column
    return None


def pair_column(texts: list[Column], delimiter: str | None) -> tuple[Column, str] | None:
    """The one column whose values mostly hold two texts split by a line break (or an in-field tab)."""
    separators = ["\n"] + (["\t"] if delimiter != "\t" else [])
    found: list[tuple[Column, str]] = []
    for column in texts:
        for separator in separators:
            twos = sum(
                1
                for v in column.strings
                if len(parts := v.strip().split(separator)) == 2 and all(p.strip() for p in parts)
            )
            if column.strings and twos >= 0.8 * len(column.strings):
                found.append((column, separator))
                break
    return found[0] if len(found) == 1 else None


def _shadowed(base: Column, variant: Column) -> bool:
    """`variant` is `base`'s name with a suffix: sentence_A_original, question1_clean, text_a.raw."""
    if not isinstance(base.ref, str) or not isinstance(variant.ref, str):
        return False
    short, long = base.ref.strip().lower(), variant.ref.strip().lower()
    return bool(short) and long.startswith(short) and len(long) > len(short) and long[len(short)] in "_-. "


def _supports(base: Column, variant: Column) -> bool:
    """The sample backs the plain column over its suffixed sibling: text wherever the sibling has some."""
    return base.textual and not base.low_cardinality and len(base.present) >= 0.95 * len(variant.present)


def text_columns(texts: list[Column], notes: list[str]) -> tuple[Column, Column]:
    """The two text columns: the longest free-text ones, unless a suffixed sibling shadows a plainer one.

    Datasets often ship a text next to its source form (SICK's sentence_A beside sentence_A_original):
    the plainly named column is the one the labels were given on, so it is preferred over a longer
    sibling when the sample supports it (free text in as many rows). Whenever another candidate is
    close to a chosen one (a sibling, or a similar length), a review note names both.
    """
    # of a column and its suffixed sibling only one is a candidate: the plain one if the sample backs it
    dropped = {
        (variant.position if _supports(base, variant) else base.position)
        for variant in texts
        for base in texts
        if _shadowed(base, variant)
    }
    ranked = [c for c in texts if c.position not in dropped]
    picked = (ranked if len(ranked) >= 2 else texts)[:2]
    weaker = min(picked, key=lambda c: c.mean_length)
    close: list[str] = []
    for other in sorted((c for c in texts if c not in picked), key=lambda c: c.position):
        if other.low_cardinality:  # a category (a source name, a split), never a text of the pair
            continue
        sibling = next((c for c in picked if _shadowed(c, other) or _shadowed(other, c)), None)
        if sibling is None and other.mean_length < 0.8 * weaker.mean_length:
            continue
        chosen = sibling or weaker
        why = "a name-similar sibling" if sibling else "a text column of similar length"
        close.append(
            f"{other.label} ({why} of {chosen.label}, mean {other.mean_length:.0f} against "
            f"{chosen.mean_length:.0f} characters)"
        )
    if close:
        chosen_labels = " and ".join(c.label for c in sorted(picked, key=lambda c: c.position))
        notes.append(
            f"text columns {chosen_labels} were chosen, but other candidates are close: {'; '.join(close)}; "
            "check which columns the labels were given on"
        )
    return picked[0], picked[1]


def label_column(numeric: list[Column]) -> Column | None:
    """The numeric column most like a label: label-like name, binary or fractional values, not an id."""

    def rank(column: Column) -> tuple[bool, bool, bool, int]:
        named = isinstance(column.ref, str) and bool(LABEL_NAME.search(column.ref))
        shaped = not column.integers or len(set(column.numbers)) <= 2
        return named, shaped, not column.id_like, -column.position

    return max(numeric, key=rank) if numeric else None


def label_spec(column: Column, notes: list[str], inline: dict[str, str]) -> dict[str, Any]:
    """The contract's `label:` section: binary with the values seen, or graded over the sample's range."""
    numbers = column.numbers
    distinct = sorted({int(n) for n in numbers}) if column.integers else []
    if column.integers and len(distinct) <= 2:
        if len(distinct) == 1:
            values = sorted({0, 1} | set(distinct)) if distinct[0] in (0, 1) else distinct
            notes.append(
                f"the label column {column.label} holds only {distinct[0]} in the sample: check values"
            )
        else:
            values = distinct
        inline["label.values"] = "values seen in the sample"
        return {"kind": "binary", "values": values}
    low, high = math.floor(min(numbers)), math.ceil(max(numbers))
    if high <= low:
        high = low + 1
    inline["label.range"] = f"review: seen {min(numbers):g} to {max(numbers):g}: check the documented range"
    notes.append(
        f"the label {column.label} is graded; its range [{low}, {high}] is the sample's, rounded out: "
        "set the documented scale (score = (raw - min) / (max - min))"
    )
    return {"kind": "graded", "range": [low, high]}


def extra_entry(column: Column) -> str | dict[str, Any]:
    """A `columns.extra` entry: the column's own name when it is a valid, free one, else name + column."""
    ref = column.ref
    if isinstance(ref, str) and _EXTRA_NAME.match(ref) and ref not in _CANONICAL:
        return ref
    name = re.sub(r"[^A-Za-z0-9_]+", "_", str(ref)).strip("_").lower() if isinstance(ref, str) else ""
    if not name or not _EXTRA_NAME.match(name):
        name = f"column_{column.position}" if not name else f"c_{name}"
    if name in _CANONICAL:
        name = f"{name}_raw" if name != "score_raw" else "score_raw_extra"
    return {"name": name, "column": ref}


def pair_id_rank(column: Column) -> int:
    """How much a column's name says pair id: 3 pair + id, 2 an `id` word, 1 contains id, 0 not at all."""
    if not isinstance(column.ref, str):
        return 0
    name = column.ref.lower()
    token_id = bool(re.search(r"(^|[^a-z])id($|[^a-z])", name))
    if "pair" in name and (token_id or "id" in name):
        return 3
    if token_id:
        return 2
    return 1 if "id" in name else 0
