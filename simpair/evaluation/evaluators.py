"""Evaluators in the sentence-transformers sense: built on pairs and gold, called with a predictor.

Each scores its pairs with the predictor it is given and hands the scores to a metric function
(`simpair.metrics`). The binary one picks its decision threshold on the data it was built on (dev)
unless given one, so a test evaluator applies the dev threshold unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from simpair.metrics.binary_classification import best_threshold, binary_metrics
from simpair.metrics.graded_similarity import graded_metrics

if TYPE_CHECKING:
    from simpair.models.predictor import Predictor


class PairEvaluator:
    """What both evaluators hold: the pairs, a name, and the batch size they are scored with."""

    def __init__(self, text_a: Sequence[str], text_b: Sequence[str], name: str, batch_size: int) -> None:
        self.text_a, self.text_b = list(text_a), list(text_b)
        self.name = name
        self.batch_size = batch_size

    def predict(self, predictor: Predictor) -> dict[str, np.ndarray]:
        return predictor.predict(self.text_a, self.text_b, batch_size=self.batch_size)


class BinaryClassificationEvaluator(PairEvaluator):
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
        super().__init__(text_a, text_b, name, batch_size)
        self.labels = np.asarray(labels, dtype=np.int64)
        self.threshold = threshold
        self.threshold_metric = threshold_metric
        self.probabilities: np.ndarray | None = None

    def __call__(self, predictor: Predictor) -> dict[str, float]:
        out = self.predict(predictor)
        self.probabilities = out.get("probability", out["score"])
        threshold = self.threshold
        if threshold is None:
            threshold = best_threshold(self.probabilities, self.labels, self.threshold_metric)
        return binary_metrics(self.probabilities, self.labels, threshold)


class GradedSimilarityEvaluator(PairEvaluator):
    """Scores pairs with a predictor and correlates the 0-1 score with gold 0-1 scores."""

    def __init__(
        self,
        text_a: Sequence[str],
        text_b: Sequence[str],
        scores: Sequence[float],
        name: str = "",
        batch_size: int = 64,
    ) -> None:
        super().__init__(text_a, text_b, name, batch_size)
        self.gold = np.asarray(scores, dtype=np.float64)
        self.predicted: np.ndarray | None = None

    def __call__(self, predictor: Predictor) -> dict[str, float]:
        self.predicted = self.predict(predictor)["score"]
        return graded_metrics(self.predicted, self.gold)
