"""Paraphrase (binary) metrics: accuracy, F1, precision, recall, ROC-AUC, confusion matrix.

The decision threshold is a model parameter: `best_threshold` chooses it on dev, and `binary_metrics`
applies it unchanged to test, as sentence-transformers' `BinaryClassificationEvaluator` does. Choosing
it on test would report an optimistic number.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    f1_score,
    precision_score,
    recall_score,
)

from simpair.metrics.threshold_free import roc_auc


def best_threshold(scores: np.ndarray, labels: np.ndarray, metric: str = "accuracy") -> float:
    """The cut-off on `scores` maximising `metric` (accuracy or f1) on these labels.

    Candidates are midpoints between consecutive distinct scores, so the result generalises better
    than a threshold sitting exactly on one example's score. Ties go to the threshold closest to the
    median candidate, which keeps it stable across seeds.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    distinct = np.unique(scores)
    if len(distinct) == 1:
        return float(distinct[0])
    candidates = np.concatenate([[distinct[0] - 1e-6], (distinct[1:] + distinct[:-1]) / 2])
    # Vectorised sweep: predictions are scores >= t.
    order = np.argsort(scores)
    sorted_scores, sorted_labels = scores[order], labels[order]
    pos_total = sorted_labels.sum()
    n = len(labels)
    below = np.searchsorted(sorted_scores, candidates, side="left")  # predicted negative count
    cum_pos = np.concatenate([[0], np.cumsum(sorted_labels)])
    fn = cum_pos[below]
    tp = pos_total - fn
    tn = below - fn
    fp = (n - below) - tp
    if metric == "accuracy":
        values = (tp + tn) / n
    elif metric == "f1":
        values = 2 * tp / np.maximum(2 * tp + fp + fn, 1)
    else:
        raise ValueError(f"threshold metric must be accuracy or f1, got {metric!r}")
    best = np.flatnonzero(values >= values.max() - 1e-12)
    pick = best[np.argmin(np.abs(best - np.median(best)))]
    return float(candidates[pick])


def binary_metrics(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float]:
    """Classification metrics of `scores >= threshold` against 0/1 labels (plus threshold-free AUC)."""
    labels = np.asarray(labels).astype(np.int64)
    predicted = (np.asarray(scores) >= threshold).astype(np.int64)
    tn, fp, fn, tp = confusion_matrix(labels, predicted, labels=[0, 1]).ravel()
    out = {
        "accuracy": float(accuracy_score(labels, predicted)),
        "f1": float(f1_score(labels, predicted, zero_division=0)),
        "precision": float(precision_score(labels, predicted, zero_division=0)),
        "recall": float(recall_score(labels, predicted, zero_division=0)),
        "threshold": float(threshold),
        "tn": int(tn),
        "fp": int(fp),
        "fn": int(fn),
        "tp": int(tp),
        "n": len(labels),
    }
    out["roc_auc"] = roc_auc(labels, scores)
    return out
