"""Two models on the same few hundred labelled pairs: each one's figure and their difference, with 95%
paired bootstrap intervals.

The gate's traffic check reads this: a hundred reviewed pairs give a figure whose interval is several
points wide, so a person (and the `required` rule) needs the interval, not the point alone. The
resamples are paired (both models scored on each draw of the same rows) because the errors of two
models on one pair are correlated, so the difference is known far better than either figure alone.
Each resample's figure is computed in numpy (no scikit-learn call per round): accuracy and F1 at each
model's own threshold, ROC-AUC as Mann-Whitney U with average ranks (sklearn's, ties included), Pearson
and Spearman as correlations of values or ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from simpair.metrics.bootstrap import rank_roc_auc

ROUNDS = 1000
THRESHOLD_METRICS = ("accuracy", "f1")
BINARY_METRICS = (*THRESHOLD_METRICS, "roc_auc")
GRADED_METRICS = ("spearman", "pearson")


@dataclass(frozen=True)
class PairedFigures:
    """One metric of a model and a reference on the same pairs; intervals are 95% percentile ones."""

    metric: str
    n: int
    model: float
    model_low: float
    model_high: float
    reference: float
    delta: float
    delta_low: float
    delta_high: float


def figure(metric: str, score: np.ndarray, gold: np.ndarray, threshold: float | None = None) -> float:
    """`metric` of `score` against `gold` (0/1 for the binary metrics, graded for the correlations);
    NaN where it is undefined (one class only, constant values)."""
    score, gold = np.asarray(score, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if metric in THRESHOLD_METRICS:
        if threshold is None:
            raise ValueError(f"{metric} needs the model's decision threshold")
        predicted, positive = score >= threshold, gold == 1
        if metric == "accuracy":
            return float(np.mean(predicted == positive)) if len(gold) else float("nan")
        tp = float(np.sum(predicted & positive))
        wrong = float(np.sum(predicted != positive))
        return 2 * tp / (2 * tp + wrong) if 2 * tp + wrong else 0.0
    if metric == "roc_auc":
        return rank_roc_auc(score, gold)
    if metric in GRADED_METRICS:
        if len(gold) < 2 or np.ptp(score) == 0 or np.ptp(gold) == 0:
            return float("nan")
        if metric == "spearman":
            score, gold = rankdata(score), rankdata(gold)
        return float(np.corrcoef(score, gold)[0, 1])
    raise ValueError(f"no paired interval for metric {metric!r}; known: {[*BINARY_METRICS, *GRADED_METRICS]}")


def paired_figures(
    metric: str,
    gold: np.ndarray,
    model: np.ndarray,
    reference: np.ndarray,
    model_threshold: float | None = None,
    reference_threshold: float | None = None,
    rounds: int = ROUNDS,
    seed: int = 0,
) -> PairedFigures:
    """`metric` of `model` and `reference` on the same pairs, with the model's interval and the paired
    interval of the difference (model - reference). Intervals are NaN when fewer than half the
    resamples give a defined figure (a handful of pairs, or one class only)."""
    gold = np.asarray(gold, dtype=np.float64)
    model, reference = np.asarray(model, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if not len(gold) == len(model) == len(reference):
        raise ValueError(
            f"gold, model and reference differ in length: {len(gold)}, {len(model)}, {len(reference)}"
        )
    point_model = figure(metric, model, gold, model_threshold)
    point_reference = figure(metric, reference, gold, reference_threshold)
    rng = np.random.default_rng(seed)
    n = len(gold)
    mine, deltas = [], []
    for _ in range(rounds if n else 0):
        idx = rng.integers(0, n, n)
        a = figure(metric, model[idx], gold[idx], model_threshold)
        b = figure(metric, reference[idx], gold[idx], reference_threshold)
        if math.isfinite(a):
            mine.append(a)
            if math.isfinite(b):
                deltas.append(a - b)
    low, high = _interval(mine, rounds)
    d_low, d_high = _interval(deltas, rounds)
    return PairedFigures(
        metric, n, point_model, low, high, point_reference, point_model - point_reference, d_low, d_high
    )


def _interval(values: list[float], rounds: int) -> tuple[float, float]:
    if len(values) < max(rounds // 2, 1):
        return float("nan"), float("nan")
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)
