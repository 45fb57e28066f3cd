"""Paraphrase (binary) evaluation: accuracy, F1, precision, recall, ROC-AUC, confusion matrix.

The decision threshold is a model parameter, so it is chosen on the data this evaluator is given when
it is built (dev), then frozen and applied unchanged to test, as in sentence-transformers'
`BinaryClassificationEvaluator`. Choosing it on test would report an optimistic number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

if TYPE_CHECKING:
    from simpair.models.predictor import Predictor


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
    out["roc_auc"] = float(roc_auc_score(labels, scores)) if len(set(labels.tolist())) == 2 else float("nan")
    return out


class BinaryClassificationEvaluator:
    """Scores pairs with a predictor and reports classification metrics at a fixed threshold.

    Built on dev without a threshold, it picks the best one there (`threshold_metric`); pass that
    threshold when building the test evaluator.
    """

    def __init__(
        self,
        text_a: Sequence[str],
        text_b: Sequence[str],
        labels: Sequence[int],
        threshold: float | None = None,
        threshold_metric: str = "accuracy",
        name: str = "",
        batch_size: int = 64,
    ) -> None:
        self.text_a, self.text_b = list(text_a), list(text_b)
        self.labels = np.asarray(labels, dtype=np.int64)
        self.threshold = threshold
        self.threshold_metric = threshold_metric
        self.name = name
        self.batch_size = batch_size
        self.probabilities: np.ndarray | None = None

    def __call__(self, predictor: Predictor) -> dict[str, float]:
        out = predictor.predict(self.text_a, self.text_b, batch_size=self.batch_size)
        self.probabilities = out.get("probability", out["score"])
        threshold = self.threshold
        if threshold is None:
            threshold = best_threshold(self.probabilities, self.labels, self.threshold_metric)
        return binary_metrics(self.probabilities, self.labels, threshold)
