"""Evaluation runners: a model scored on pairs with gold labels, and what the report shows.

The metric functions they call live one floor down, in `simpair.metrics`; models are loaded through
`simpair.runtime.loader`. The ways `simpair evaluate` runs each have their own sub-package or module,
imported by name (never from here, which keeps this package light): `splits` (`evaluate_model`, a
saved model on ingested splits), `file` (`evaluate_file`, a user's own labelled file beside the
zero-shot backbone), `common_set` (several models on the same pairs, for the gate). Evaluators take a
loaded predictor and choose decision thresholds only on the data they are given (dev), never on test.
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
