"""The untrained backbone as the baseline: the same zero-shot model the promotion gate measures first.

Scored on the same rows as the model. It gets a threshold only when a dataset the model trained on is
ingested in this home (picked on that dataset's training split, as the gate does); otherwise only its
threshold-free figures are reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simpair.catalog import Catalog
from simpair.evaluation.file.metrics import file_metrics
from simpair.evaluation.file.validate import LabelledRows
from simpair.models.metadata import ModelMetadata
from simpair.runtime.loader import load_predictor


@dataclass
class ZeroShotScores:
    """The baseline's summary for the report (backbone, threshold and its source, metrics) and scores."""

    summary: dict[str, Any]
    raw: np.ndarray  # the backbone's cosine per row
    score: np.ndarray  # the same as a 0-1 score


def threshold_dataset(home: Path, meta: ModelMetadata) -> str | None:
    """An ingested dataset the model trained on: the baseline's threshold is picked on its train split."""
    known = set(Catalog(home).datasets())
    for entry in meta.train_datasets:
        dataset = entry.split("/")[0]
        if dataset in known:
            return dataset
    return None


def score_zero_shot(
    meta: ModelMetadata, home: Path, data: LabelledRows, label_kind: str, batch_size: int
) -> ZeroShotScores:
    """Build (or reuse) the model's zero-shot backbone, score the kept rows with it, measure it."""
    # the registry package brings MLflow in: only when a baseline is asked for
    from simpair.evaluation.zero_shot_baseline import zero_shot_model

    dataset = threshold_dataset(home, meta) if meta.task == "paraphrase" else None
    zs_dir = zero_shot_model(meta.backbone, meta.task, home, threshold_dataset=dataset)
    zs_meta = ModelMetadata.read(zs_dir)
    source = getattr(zs_meta, "threshold_source", None)
    zs_threshold = float(zs_meta.threshold) if source else None
    zs_predictor = load_predictor(zs_dir)
    raw = zs_predictor.predict_raw(data.text_a, data.text_b, batch_size=batch_size)
    score = np.asarray(zs_predictor.from_raw(raw)["score"], dtype=np.float64)
    summary = {
        "backbone": meta.backbone,
        "model_dir": str(zs_dir),
        "threshold": zs_threshold,
        "threshold_source": source,
        "metrics": file_metrics(label_kind, score, data.gold, zs_threshold, raw=raw.astype(np.float64)),
    }
    return ZeroShotScores(summary, raw, score)
