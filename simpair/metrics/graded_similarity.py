"""Graded-similarity metrics: Spearman, Pearson, MSE and MAE on the 0-1 scale.

Spearman's rank correlation is the headline number for STS (as in SentEval and sentence-transformers'
`EmbeddingSimilarityEvaluator`) because it only asks the model to order pairs; MSE and MAE are reported
as well because users of the 0-1 score consume its value, not just its rank.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import pearsonr, spearmanr


def graded_metrics(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    predicted = np.asarray(predicted, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    constant = np.ptp(predicted) == 0 or np.ptp(gold) == 0
    return {
        "spearman": float("nan") if constant else float(spearmanr(predicted, gold).statistic),
        "pearson": float("nan") if constant else float(pearsonr(predicted, gold).statistic),
        "mse": float(np.mean((predicted - gold) ** 2)),
        "mae": float(np.mean(np.abs(predicted - gold))),
        "n": len(gold),
    }
