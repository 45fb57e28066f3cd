"""Stacked ensembles: several trained models combined by a small linear model fitted on dev.

A cross-encoder reads both sentences together and a bi-encoder compares two independent embeddings,
so they make different mistakes; a ridge (graded) or logistic (paraphrase) regression on their raw
outputs plus two lexical-overlap features, fitted on the members' shared dev split, is the
"stacked generalisation" of Wolpert (1992). The result is an ordinary model directory
(`kind: stacked`) that `simpair.predictors.load_predictor`, evaluation, the registry and bulk scoring
all accept. A cascade (`kind: cascade`, `simpair.ensemble.cascade`) runs a bi-encoder on every pair
and its cross-encoder only on the pairs a dev-fitted band marks as uncertain.
"""

from simpair.ensemble.cascade import CASCADE_FILE, CascadePredictor, CascadeSpec, compare_with_cross
from simpair.ensemble.cascade_fit import fit_cascade
from simpair.ensemble.config import StackConfig, is_stack_config
from simpair.ensemble.features import LEXICAL_FEATURES, lexical_features
from simpair.ensemble.fit import fit_stack
from simpair.ensemble.soup import fit_soup
from simpair.ensemble.stacked import STACK_FILE, StackedPredictor, StackSpec
from simpair.ensemble.train import StackResult, train_stack

__all__ = [
    "CASCADE_FILE",
    "LEXICAL_FEATURES",
    "CascadePredictor",
    "CascadeSpec",
    "compare_with_cross",
    "fit_cascade",
    "STACK_FILE",
    "StackConfig",
    "StackResult",
    "StackSpec",
    "StackedPredictor",
    "fit_soup",
    "fit_stack",
    "is_stack_config",
    "lexical_features",
    "train_stack",
]
