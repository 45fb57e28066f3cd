"""Evaluation: one evaluator per metric family, plots, and `evaluate_model` for saved models.

Evaluators choose decision thresholds only on the data they are given (dev), never on test.
"""

from simpair.evaluation.binary_classification import (
    BinaryClassificationEvaluator,
    best_threshold,
    binary_metrics,
)
from simpair.evaluation.evaluate import EvalResult, evaluate_model
from simpair.evaluation.graded_similarity import GradedSimilarityEvaluator, graded_metrics

__all__ = [
    "BinaryClassificationEvaluator",
    "EvalResult",
    "GradedSimilarityEvaluator",
    "best_threshold",
    "binary_metrics",
    "evaluate_model",
    "graded_metrics",
]
