"""Evaluate a model on a user's own labelled file, beside the untrained backbone's zero-shot figure.

A user with their own pairs wants to know whether fine-tuning helped on *their* data without ingesting
it into the catalog first, so this reads the file directly (Parquet, CSV or TSV), validates it the way
the scoring-input contract does (`text_a`/`text_b` required; null or blank texts are dropped, never
scored) plus the labels, and reports the same metrics, plots and markdown as `simpair.evaluation.splits`.

Why a zero-shot column: a model's number alone does not say whether training was worth it; the same
untrained backbone the promotion gate uses as its first bar (`simpair.evaluation.zero_shot_baseline`) is
scored on the same rows, and the verdict rests on a paired bootstrap of the difference, so a gain that
a different draw of the same few hundred pairs would erase is called unclear instead of a win.

Thresholds are never tuned on the file: the model applies its own frozen (dev) threshold; the
zero-shot baseline has one only when a dataset the model trained on is ingested in this home (picked on
its training split, as the gate does), otherwise it gets threshold-free figures (ROC-AUC) only.

One module per step, in the order `run.evaluate_file` takes them: `read` (the file), `validate` (rows
and labels), `leakage` (pairs the model trained on), `zero_shot` (the baseline), `metrics`,
`simpair.metrics.bootstrap` (the difference and its verdict), `plots`, `report`. It resolves registry
refs and loads models through `simpair.runtime`, the floor below.
"""

from simpair.evaluation.file.read import FileEvalError
from simpair.evaluation.file.run import FileEvalResult, evaluate_file

__all__ = ["FileEvalError", "FileEvalResult", "evaluate_file"]
