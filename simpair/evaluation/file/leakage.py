"""Which rows of a user's file are pairs the model was trained on (as far as this home has ingested).

Kept apart from validation because it needs the catalog and the model's training record, where
validation needs only the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from simpair.catalog import Catalog
from simpair.ingest.clean import CleanStats, clean_text
from simpair.models.metadata import ModelMetadata
from simpair.pairs import pair_key
from simpair.training.leaked_pairs import trained_pairs


def training_overlap(
    home: Path, model_dir: Path, meta: ModelMetadata, text_a: list[str], text_b: list[str]
) -> tuple[np.ndarray, list[str], list[str]]:
    """Which rows are pairs the model was trained on: (mask, splits checked, splits not ingested here).

    A figure on pairs the weights have seen says nothing about the user's data. Identity is ingest's
    (`pair_key` on cleaned texts, either order), against the model's exact training pairs when it lists
    them, else its whole training splits, read at the version it trained on when that is still here.
    """
    exact, splits = trained_pairs(model_dir, meta)
    by_split: dict[str, set[str] | None] = {}  # None: the whole split counts (no exact list)
    if exact is None:
        by_split = dict.fromkeys(splits)
    if exact is not None:
        for (dataset, split), ids in exact.collect().group_by("dataset", "split", maintain_order=True):
            by_split[f"{dataset}/{split}"] = set(ids["pair_id"].to_list())
    catalog = Catalog(home)
    known = set(catalog.datasets())
    keys: set[str] = set()
    checked, unchecked = [], []
    for label in sorted(by_split):
        dataset, _, split = label.partition("/")
        if dataset not in known or split not in catalog.splits(dataset):
            unchecked.append(label)
            continue
        version = meta.dataset_versions.get(dataset)
        frame = catalog.read_split(dataset, split, version if version in catalog.versions(dataset) else None)
        ids = by_split[label]
        if ids is not None:
            frame = frame.filter(pl.col("pair_id").is_in(list(ids)))
        keys.update(pair_key(a, b) for a, b in zip(frame["text_a"], frame["text_b"], strict=True))
        checked.append(label)
    if not keys:
        return np.zeros(len(text_a), dtype=bool), checked, unchecked
    stats = CleanStats()
    mask = np.fromiter(
        (
            pair_key(clean_text(a, stats), clean_text(b, stats)) in keys
            for a, b in zip(text_a, text_b, strict=True)
        ),
        dtype=bool,
        count=len(text_a),
    )
    return mask, checked, unchecked
