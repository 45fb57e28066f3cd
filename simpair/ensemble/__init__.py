"""Stacked ensembles: several trained models combined by a small linear model fitted on dev.

A cross-encoder reads both sentences together and a bi-encoder compares two independent embeddings,
so they make different mistakes; a ridge (graded) or logistic (paraphrase) regression on their raw
outputs plus two lexical-overlap features, fitted on the members' shared dev split, is the
"stacked generalisation" of Wolpert (1992). The result is an ordinary model directory
(`kind: stacked`) that `simpair.runtime.loader.load_predictor`, evaluation, the registry and bulk scoring
all accept. A cascade (`kind: cascade`, run by `simpair.runtime.cascade`) runs a bi-encoder on every pair
and its cross-encoder only on the pairs a dev-fitted band marks as uncertain.

The names below load on first use: a nightly profile checks whether a task's config is a stack
(`simpair.ensemble.config`), and that must not import torch, transformers and scikit-learn (about
9 s of CPU here) in a process that only reads the profile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simpair.lazy import lazy_exports

if TYPE_CHECKING:
    from simpair.ensemble.cascade_band import compare_with_cross
    from simpair.ensemble.cascade_fit import fit_cascade
    from simpair.ensemble.config import StackConfig, is_stack_config
    from simpair.ensemble.fit import fit_stack
    from simpair.ensemble.soup import fit_soup
    from simpair.ensemble.train import StackResult, train_stack

_EXPORTS = {
    "StackConfig": "simpair.ensemble.config",
    "StackResult": "simpair.ensemble.train",
    "compare_with_cross": "simpair.ensemble.cascade_band",
    "fit_cascade": "simpair.ensemble.cascade_fit",
    "fit_soup": "simpair.ensemble.soup",
    "fit_stack": "simpair.ensemble.fit",
    "is_stack_config": "simpair.ensemble.config",
    "train_stack": "simpair.ensemble.train",
}
__all__ = [
    "StackConfig",
    "StackResult",
    "compare_with_cross",
    "fit_cascade",
    "fit_soup",
    "fit_stack",
    "is_stack_config",
    "train_stack",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
