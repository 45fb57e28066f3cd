"""The file's figures for one scorer: thresholded metrics only with a frozen threshold, else ROC-AUC.

Shared by the model and the zero-shot baseline, so both are measured the same way on the same rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simpair.metrics.binary_classification import binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.metrics.threshold_free import roc_auc

# the verdict's metric per label kind: threshold-free, so a baseline with no threshold has it too
HEADLINE = {"graded": "spearman", "binary": "roc_auc"}
MODEL_KEYS = {
    "binary": ("accuracy", "f1", "precision", "recall", "roc_auc"),
    "graded": ("spearman", "pearson", "mse", "mae"),
}


def file_metrics(
    label_kind: str,
    score: np.ndarray,
    gold: np.ndarray,
    threshold: float | None,
    raw: np.ndarray | None = None,
) -> dict[str, Any]:
    """Binary: thresholded metrics only with a frozen threshold, ROC-AUC always; graded: correlations.

    `raw` (the zero-shot cosine) replaces the clipped 0-1 score for the threshold-free figures, so
    negative cosines, all clipped to 0, are not collapsed into one tie.
    """
    ranked = score if raw is None else raw
    if label_kind == "binary":
        if threshold is not None:
            out = binary_metrics(score, gold, threshold)
            if raw is not None:
                out["roc_auc"] = roc_auc(gold, raw)
            return out
        return {"roc_auc": roc_auc(gold, ranked), "n": len(gold), "threshold": None}
    out = graded_metrics(ranked, gold)
    if raw is not None:  # an uncalibrated cosine is no 0-1 score: only its order and linearity count
        out = {k: out[k] for k in ("spearman", "pearson", "n")}
    return out
