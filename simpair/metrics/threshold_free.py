"""Threshold-free figures of raw outputs: ROC-AUC on 0/1 labels, Spearman on graded gold.

Comparing models before a threshold exists (WiSE-FT's path, stack members, a zero-shot backbone) needs
a figure that only asks the outputs to order pairs, so any monotone output (a logit, a cosine, a
probability) gives the same number.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC-AUC, or NaN when the labels hold one class only (the figure is undefined there)."""
    labels = np.asarray(labels)
    if len(np.unique(labels)) != 2:
        return float("nan")
    return float(roc_auc_score(labels, np.asarray(scores, dtype=np.float64)))


def spearman(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman's rank correlation, or NaN when either side is constant."""
    predicted, gold = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if len(gold) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(spearmanr(predicted, gold).statistic)


def rank_figure(raw: np.ndarray, gold: np.ndarray, binary: bool) -> float:
    """ROC-AUC for 0/1 gold, Spearman for graded gold."""
    return roc_auc(gold, raw) if binary else spearman(raw, gold)
