"""Evaluate a saved model of any kind on ingested splits: metrics, plots and a markdown report.

`run.evaluate_model` loads the directory through `simpair.runtime.loader.load_predictor` (plain, soup or
stack), so this package sits above the loader; the metrics, plots and leakage filter it uses live
below it, in the building blocks of `simpair.evaluation`. `report` renders `report.md`.

The model's own decision threshold (chosen on dev at training time) is applied unchanged; nothing is
tuned on the evaluated data. Pairs the ingest leakage report finds among the pairs this model was
trained on (parents included) are excluded and counted, so a score never rests on memorised pairs.
"""

from simpair.evaluation.splits.run import EvalResult, default_eval_splits, evaluate_model

__all__ = ["EvalResult", "default_eval_splits", "evaluate_model"]
