"""Evaluation building blocks: metrics and evaluators per metric family, plots, the leakage filter.

Evaluators take a loaded predictor and choose decision thresholds only on the data they are given
(dev), never on test. `simpair.evaluate.evaluate_model` (any saved model directory on ingested
splits) is built from these and sits above the model loader.
"""

from simpair.evaluation.binary_classification import (
    BinaryClassificationEvaluator,
    best_threshold,
    binary_metrics,
)
from simpair.evaluation.graded_similarity import GradedSimilarityEvaluator, graded_metrics
from simpair.evaluation.leaked_pairs import leaked_pair_ids

__all__ = [
    "BinaryClassificationEvaluator",
    "GradedSimilarityEvaluator",
    "best_threshold",
    "binary_metrics",
    "graded_metrics",
    "leaked_pair_ids",
]
