"""Two models on the reviewed traffic pairs: each one's figure and their difference, with intervals.

The gate scores the challenger and its reference (the champion, or the untrained backbone when there is
none) on the `traffic` split through `common_set.evaluate`, which keeps each model's scored rows with
their gold. This joins the two on the pairs both scored and hands them to the paired bootstrap
(`simpair.metrics.paired_interval`), each model read the way the gate reads it elsewhere: accuracy and
F1 at the model's own dev threshold, rank figures on the raw output of an uncalibrated bi-encoder.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from simpair.evaluation.common_set import Evaluation
from simpair.metrics.paired_interval import BINARY_METRICS, PairedFigures, paired_figures


def split_is_binary(frame: pl.DataFrame) -> bool:
    """Whether a scored split's gold is 0/1 labels (else graded scores)."""
    return frame.height > 0 and frame["gold_label"].null_count() == 0


def _values(frame: pl.DataFrame, evaluation: Evaluation, metric: str, binary: bool) -> np.ndarray:
    if evaluation.clipped and metric in ("roc_auc", "spearman"):
        return frame["raw"].to_numpy()
    if binary:
        return frame["probability" if "probability" in frame.columns else "score"].to_numpy()
    return frame["score"].to_numpy()


def traffic_figures(label: str, metric: str, model: Evaluation, reference: Evaluation) -> PairedFigures:
    """`metric` of `model` and `reference` on the pairs of split `label` that both scored (gold from
    the split), with the model's 95% interval and the paired interval of the difference."""
    if label not in model.scored or label not in reference.scored:
        raise ValueError(f"traffic split {label} was not scored for both models")
    mine, theirs = model.scored[label], reference.scored[label]
    binary = split_is_binary(mine)
    if (metric in BINARY_METRICS) != binary:
        kind = "0/1 labels" if binary else "graded scores"
        raise ValueError(f"traffic split {label} has {kind}; {metric!r} does not apply to them")
    # the reference's value columns renamed before the join, so a column only one side has (a calibrated
    # champion's probability) is never read as the other side's
    columns = [c for c in ("raw", "score", "probability") if c in theirs.columns]
    renamed = theirs.select("pair_id", *[pl.col(c).alias(f"{c}_ref") for c in columns])
    joined = mine.join(renamed, on="pair_id", how="inner")
    gold = joined["gold_label" if binary else "gold_score"].to_numpy()
    ref = joined.select([pl.col(f"{c}_ref").alias(c) for c in columns])
    return paired_figures(
        metric,
        gold,
        _values(joined, model, metric, binary),
        _values(ref, reference, metric, binary),
        model.threshold,
        reference.threshold,
    )
