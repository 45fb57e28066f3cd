"""Graded-similarity evaluation: Spearman, Pearson, MSE and MAE on the 0-1 scale.

Spearman's rank correlation is the headline number for STS (as in SentEval and sentence-transformers'
`EmbeddingSimilarityEvaluator`) because it only asks the model to order pairs; MSE and MAE are reported
as well because users of the 0-1 score consume its value, not just its rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import pearsonr, spearmanr

if TYPE_CHECKING:
    from simpair.models.predictor import Predictor


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


class GradedSimilarityEvaluator:
    """Scores pairs with a predictor and correlates the 0-1 score with gold 0-1 scores."""

    def __init__(
        self,
        text_a: Sequence[str],
        text_b: Sequence[str],
        scores: Sequence[float],
        name: str = "",
        batch_size: int = 64,
    ) -> None:
        self.text_a, self.text_b = list(text_a), list(text_b)
        self.gold = np.asarray(scores, dtype=np.float64)
        self.name = name
        self.batch_size = batch_size
        self.predicted: np.ndarray | None = None

    def __call__(self, predictor: Predictor) -> dict[str, float]:
        self.predicted = predictor.predict(self.text_a, self.text_b, batch_size=self.batch_size)["score"]
        return graded_metrics(self.predicted, self.gold)
