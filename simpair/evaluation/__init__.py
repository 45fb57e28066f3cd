"""Evaluation, all in one place: the building blocks here, and the three ways to evaluate a model.

The building blocks (this package's own modules: metrics and evaluators per metric family, plots,
groups, the leakage filter) sit low, so training, ensembles and the gate use them too. Evaluators take
a loaded predictor and choose decision thresholds only on the data they are given (dev), never on test.

Above the model loader and the registry sit the three ways `simpair evaluate` runs, each in its own
sub-package or module, imported by name (never from here, which keeps this package light):
`splits` (`evaluate_model`, a saved model on ingested splits), `file` (`evaluate_file`, a user's own
labelled file beside the zero-shot backbone) and `transfer` (in its domain and off it).
"""

from simpair.evaluation.evaluators import BinaryClassificationEvaluator, GradedSimilarityEvaluator
from simpair.metrics.binary_classification import best_threshold, binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.training.leaked_pairs import leaked_pair_ids

__all__ = [
    "BinaryClassificationEvaluator",
    "GradedSimilarityEvaluator",
    "best_threshold",
    "binary_metrics",
    "graded_metrics",
    "leaked_pair_ids",
]
