"""One split's figures and plots: binary metrics at the model's threshold, correlations on graded gold.

What `evaluate_model` reports per split, apart from reading and scoring it: the metric functions come
from `simpair.metrics`, the plots from `simpair.evaluation.plots`, named after the split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simpair.evaluation.plots import confusion_matrix_png, histogram_png, scatter_png
from simpair.metrics.binary_classification import binary_metrics
from simpair.metrics.graded_similarity import graded_metrics


@dataclass(frozen=True)
class PlotPlace:
    """Where a split's plots go and what their titles say."""

    out: Path
    model_name: str
    label: str  # dataset/split

    @property
    def slug(self) -> str:
        return self.label.replace("/", "-")

    @property
    def title(self) -> str:
        return f"{self.model_name} on {self.label}"

    def path(self, plot: str) -> Path:
        return self.out / f"{self.slug}-{plot}.png"


def binary_split_metrics(
    meta: Any, score: np.ndarray, gold: np.ndarray, where: PlotPlace, plots: list[Path]
) -> dict[str, Any]:
    """Metrics against 0/1 labels at the model's threshold; draws the confusion matrix and histogram."""
    bm = binary_metrics(score, gold, meta.threshold)
    plots.append(
        confusion_matrix_png(
            bm["tn"], bm["fp"], bm["fn"], bm["tp"], where.path("confusion"),
            f"{where.title} (threshold {meta.threshold:.3f}"
            + (")" if meta.task == "paraphrase" else ", fixed: graded model)"),
        )
    )  # fmt: skip
    plots.append(
        histogram_png(
            score, gold, {0: "not paraphrase", 1: "paraphrase"}, where.path("histogram"),
            f"score per class, {where.label}", meta.threshold,
        )
    )  # fmt: skip
    return bm


def graded_split_metrics(
    score: np.ndarray, gold_score: np.ndarray, has_labels: bool, where: PlotPlace, plots: list[Path]
) -> dict[str, Any]:
    """Correlations against graded gold scores (prefixed `graded_` when 0/1 labels exist too); draws plots."""
    graded = graded_metrics(score, gold_score)
    plots.append(scatter_png(score, gold_score, where.path("scatter"), where.title))
    if has_labels:
        return {f"graded_{k}": v for k, v in graded.items()}
    buckets = np.minimum((gold_score * 5).round().astype(np.int64), 5)
    names = {b: f"gold ~{b}/5" for b in sorted(set(buckets.tolist()))}
    plots.append(
        histogram_png(score, buckets, names, where.path("histogram"), f"score per gold grade, {where.label}")
    )
    return graded
