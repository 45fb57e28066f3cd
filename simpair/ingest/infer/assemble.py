"""Turn the chosen column roles into the contract dict, with the notes a reviewer needs to check it.

Roles are picked in an order that keeps each choice simple: the split column first, then the label
(numeric), class-like extras, the texts among what is left, the pair id, and finally the rows the
default checks will quarantine.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from simpair.ingest.infer.columns import Column
from simpair.ingest.infer.errors import InferError
from simpair.ingest.infer.roles import (
    CLASS_NAME,
    NLI_VALUES,
    SPLIT_ORDER,
    extra_entry,
    label_column,
    label_spec,
    pair_column,
    pair_id_rank,
    split_column,
    split_of,
    text_columns,
)
from simpair.ingest.rows import as_text, shorten
from simpair.ingest.sources import plain_stem

# Values of the label that are not numbers, shown with their lines in the review note.
_EXAMPLES = 3


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")
    return slug or "dataset"


def assemble(
    columns: list[Column],
    fmt: dict[str, Any],
    delimiter: str | None,
    name: str,
    dataset: str | None,
    shown: str,
    notes: list[str],
    inline: dict[str, str],
) -> dict[str, Any]:
    """Pick the columns' roles and build the contract dict."""
    slug = dataset if dataset is not None else _slug(plain_stem(name))
    if not re.match(r"^[a-z0-9][a-z0-9_\-]*$", slug):
        raise InferError(f"dataset name {slug!r} must match [a-z0-9][a-z0-9_-]*")
    used: set[int] = set()

    split = split_column(columns)
    if split is not None:
        used.add(split.position)
    numeric = [c for c in columns if c.numeric and c.position not in used]
    label = label_column(numeric)
    if label is None:
        raise InferError(
            f"{shown}: no numeric column to use as the label (columns: "
            f"{', '.join(c.label for c in columns)}); a contract needs a binary or graded label"
        )
    used.add(label.position)

    extra: list[Column] = []
    for column in columns:
        if column.position in used or not column.textual or not column.low_cardinality:
            continue
        lowered = {v.lower() for v in column.distinct}
        named = isinstance(column.ref, str) and bool(CLASS_NAME.search(column.ref))
        if lowered <= NLI_VALUES or (named and all(len(v) <= 30 for v in column.distinct)):
            extra.append(column)
            used.add(column.position)
            notes.append(
                f"{column.label} looks like a class label ({', '.join(sorted(column.distinct)[:5])}); "
                f"it is kept under columns.extra beside the numeric label {label.label}"
            )

    texts = sorted(
        (c for c in columns if c.position not in used and c.textual),
        key=lambda c: (not c.low_cardinality or len(c.present) < 20, c.mean_length),
        reverse=True,
    )
    mapping: dict[str, Any] = {}
    pair = pair_column(texts, delimiter)
    if pair is not None and pair[0] is texts[0]:
        column, separator = pair
        mapping["text_pair"] = {"column": column.ref, "separator": separator}
        used.add(column.position)
        notes.append(
            f"both texts are in {column.label}, split on {separator!r}: a value without exactly one "
            "separator is quarantined"
        )
    else:
        if len(texts) < 2:
            found = ", ".join(c.label for c in texts) or "none"
            raise InferError(
                f"{shown}: expected two text columns (or one holding both texts on two lines), found {found}"
            )
        a, b = sorted(text_columns(texts, notes), key=lambda c: c.position)
        mapping["text_a"], mapping["text_b"] = a.ref, b.ref
        used.update({a.position, b.position})
        inline["columns.text_a"] = f"mean {a.mean_length:.0f} characters"
        inline["columns.text_b"] = f"mean {b.mean_length:.0f} characters"
    mapping["label"] = label.ref

    ids = [c for c in columns if c.position not in used and c.id_like]
    best_id = max(ids, key=lambda c: (pair_id_rank(c), -c.position), default=None)
    if best_id is not None and pair_id_rank(best_id) > 0:
        mapping["pair_id"] = best_id.ref
        used.add(best_id.position)
        inline["columns.pair_id"] = "unique in the sample"
        others = [c.label for c in ids if c is not best_id]
        if others:
            notes.append(f"other columns unique in the sample (pair_id candidates): {', '.join(others)}")
    else:
        listed = f" (unique in the sample: {', '.join(c.label for c in ids)})" if ids else ""
        notes.append(
            f"no pair_id proposed{listed}; without one it is '<split>-<file stem>-<line>', which changes "
            "when lines are inserted"
        )
    if extra:
        mapping["extra"] = [extra_entry(c) for c in extra]

    unused = [c for c in columns if c.position not in used]
    if unused:
        listed = ", ".join(f"{c.label} (e.g. {c.example()!r})" for c in unused)
        notes.append(f"unused columns, candidates for columns.extra: {listed}")

    label_section = label_spec(label, notes, inline)
    if label.id_like and len(label.values) > 2:
        notes.append(
            f"the label {label.label} is different in every sampled row: it may be an id rather than a label"
        )
    _note_rows(columns, mapping, notes)

    contract: dict[str, Any] = {
        "dataset": slug,
        "contract_version": "0.1.0",
        "description": "",
        "license": "",
        "format": fmt,
    }
    inline["description"] = "review: what the pairs are and what the label means"
    inline["license"] = "review: the licence terms that must travel with the data"
    if split is not None:
        found = sorted(split.distinct, key=lambda v: (SPLIT_ORDER.index(split_of(v) or "test"), v))
        mapped = {v: split_of(v) for v in found}
        targets = [s for s in SPLIT_ORDER if s in mapped.values()]
        contract["files"] = [{"split": s} for s in targets]
        contract["split_column"] = {"column": split.ref, "pattern": name, "values": mapped}
        inline["split_column.pattern"] = "review: a glob relative to --sources"
        shown_map = ", ".join(f"{k} -> {v}" for k, v in mapped.items())
        notes.append(
            f"rows are assigned to splits by {split.label}: {shown_map}; check the mapping and that the "
            "sample saw every value"
        )
    else:
        contract["files"] = [{"split": "train", "role": "train", "pattern": name}]
        notes.append(
            f"the only split is train, read from {name}; make the pattern relative to --sources "
            "(e.g. <dataset>/<file>) and add the dev and test splits' files"
        )
    contract["columns"] = mapping
    contract["label"] = label_section
    return contract


def _note_rows(columns: list[Column], mapping: dict[str, Any], notes: list[str]) -> None:
    """Rows the default checks will quarantine, so the reviewer is not surprised by the counts."""
    by_ref = {c.ref: c for c in columns}
    if "text_a" in mapping:
        a, b = by_ref[mapping["text_a"]], by_ref[mapping["text_b"]]
        pairs: Iterable[tuple[str, str]] = zip(
            (as_text(v).strip() for v in a.values), (as_text(v).strip() for v in b.values), strict=True
        )
        pairs = list(pairs)
        empty = sum(1 for x, y in pairs if not x or not y)
        seen = Counter(tuple(sorted(p)) for p in pairs if all(p))
        duplicates = sum(n - 1 for n in seen.values())
        if empty:
            notes.append(f"{empty} sampled rows have an empty text: quarantined as empty_text")
        if duplicates:
            notes.append(
                f"{duplicates} sampled rows repeat an earlier pair (either order): quarantined as duplicate; "
                "set checks.symmetric_pairs: false if the order of the texts matters"
            )
    label = by_ref[mapping["label"]]
    not_numbers = label.not_numbers()
    empty = len(label.values) - len(label.present)
    if not_numbers:
        shown = "; ".join(
            f"{'line ' + str(line) if line is not None else 'a row'}: {shorten(value)!r}"
            for line, value in not_numbers[:_EXAMPLES]
        )
        more = f"; and {len(not_numbers) - _EXAMPLES} more" if len(not_numbers) > _EXAMPLES else ""
        notes.append(
            f"the label {label.label} is not a number in {len(not_numbers)} of {len(label.present)} "
            f"sampled rows ({shown}{more}): ingest quarantines those rows as {_label_reason(label)}"
        )
    if empty:
        notes.append(
            f"{empty} sampled rows have an empty label {label.label}: ingest quarantines them as "
            f"{_label_reason(label)}"
        )


def _label_reason(label: Column) -> str:
    binary = label.integers and len(set(label.numbers)) <= 2
    return "bad_label" if binary else "bad_score"
