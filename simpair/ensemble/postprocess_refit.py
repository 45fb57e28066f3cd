"""Fit a bi-encoder's embedding post-processing outside training: for soups and existing models.

A soup's averaged weights have their own common embedding component, so the transform its ingredients
carried (simpair.models.embedding_postprocess) does not fit it; it is fitted again on the same unlabelled
training sentences the ingredients were trained on, read back from the catalog through each model's
`train_pairs.txt`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from simpair.catalog import Catalog
from simpair.models import ModelMetadata
from simpair.models.embedding_postprocess import EmbeddingPostprocess


def train_sentences(model_dirs: Sequence[Path], home: Path) -> tuple[list[str], list[str]]:
    """Distinct sentences of every pair the models were trained on, and the splits they come from."""
    wanted: dict[tuple[str, str], set[str]] = {}
    versions: dict[str, str] = {}
    for d in model_dirs:
        meta = ModelMetadata.read(d)
        versions.update(meta.dataset_versions)
        pairs_file = Path(d) / (meta.train_pairs_file or "train_pairs.txt")
        if not pairs_file.is_file():
            raise ValueError(f"{d}: no {pairs_file.name}, so its training sentences are unknown")
        for line in pairs_file.read_text().splitlines():
            if line:
                dataset, split, pair_id = line.split("\t")
                wanted.setdefault((dataset, split), set()).add(pair_id)
    catalog = Catalog(home)
    sentences: dict[str, None] = {}
    for (dataset, split), ids in sorted(wanted.items()):
        frame = catalog.read_split(dataset, split, versions.get(dataset))
        frame = frame.filter(pl.col("pair_id").is_in(list(ids)))
        for text in frame["text_a"].to_list() + frame["text_b"].to_list():
            sentences.setdefault(text, None)
    if not sentences:
        raise ValueError(f"none of the training pairs of {[str(d) for d in model_dirs]} found in {home}")
    return list(sentences), [f"{dataset}/{split}" for dataset, split in sorted(wanted)]


def refit_postprocess(
    predictor: Any, sentences: list[str], remove_directions: int, fitted_on: list[str]
) -> dict[str, Any]:
    """Fit the transform to the predictor's current weights (in place); returns its metadata entry."""
    predictor.model.post = None
    embeddings = predictor.embed(sentences)
    predictor.model.post = EmbeddingPostprocess.fit(embeddings, remove_directions).to(predictor.device)
    return predictor.model.post.describe(fitted_on, len(sentences))
