"""Is the model's gain over zero-shot real on this file? A paired bootstrap and the verdict it supports.

A gain that a different draw of the same few hundred pairs would erase is called unclear, not a win.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import rankdata

BOOTSTRAP_ROUNDS = 1000
# differences below this are float noise (the same weights scored twice differ by ~1e-9), not an effect
NOISE = 1e-6


def rank_roc_auc(score: np.ndarray, gold: np.ndarray) -> float:
    """ROC-AUC as Mann-Whitney U with average ranks (sklearn's, ties included) in plain numpy: the
    bootstraps call it thousands of times, where sklearn's input checks would cost more than the figure.
    NaN with one class only."""
    positive = gold == 1
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _headline(label_kind: str, score: np.ndarray, gold: np.ndarray) -> float:
    """The verdict's metric alone (the bootstrap calls it thousands of times)."""
    if label_kind == "binary":
        return rank_roc_auc(score, gold)
    if np.ptp(score) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(np.corrcoef(rankdata(score), rankdata(gold))[0, 1])  # Spearman, without scipy's overhead


def paired_bootstrap(
    label_kind: str, model: np.ndarray, baseline: np.ndarray, gold: np.ndarray, rounds: int = BOOTSTRAP_ROUNDS
) -> tuple[float, float] | None:
    """95% interval of (model - zero-shot) headline metric over resamples of the same rows.

    Paired (both models scored on each resample) because the question is the difference on this
    population of pairs, and the two scores' errors are correlated through the shared rows.
    """
    rng = np.random.default_rng(0)
    n = len(gold)
    rounds = max(200, min(rounds, 20_000_000 // max(n, 1)))  # big files: fewer rounds, same seconds
    deltas = []
    for _ in range(rounds):
        idx = rng.integers(0, n, n)
        g = gold[idx]
        if label_kind == "binary" and len(np.unique(g)) < 2:
            continue
        d = _headline(label_kind, model[idx], g) - _headline(label_kind, baseline[idx], g)
        if math.isfinite(d):
            deltas.append(d)
    if len(deltas) < rounds // 2:
        return None
    low, high = np.percentile(deltas, [2.5, 97.5])
    return float(low), float(high)


def verdict_line(
    metric: str, model: float, baseline: float | None, interval: tuple[float, float] | None, n: int
) -> str:
    """One sentence a user can act on: helped, hurt, or no clear difference on this file."""
    if baseline is None:
        return f"model {metric} {model:.4f} on {n} pairs (zero-shot baseline not computed)"
    if not (math.isfinite(model) and math.isfinite(baseline)):
        why = "only one class among the labels" if metric == "roc_auc" else "constant labels or scores"
        return f"no verdict: {metric} is undefined on this file ({why})"
    delta = model - baseline
    figures = f"{metric} {model:.2f} vs zero-shot {baseline:.2f} ({delta:+.2f}"
    if interval is None:
        figures += f", {n} pairs)"
        word = "helped" if delta > NOISE else ("hurt" if delta < -NOISE else "made no difference")
        return f"fine-tuning {word} on this file: {figures}"
    figures += f", 95% interval {interval[0]:+.2f} to {interval[1]:+.2f} over {n} pairs)"
    if interval[0] > NOISE:
        return f"fine-tuning helped on this file: {figures}"
    if interval[1] < -NOISE:
        return f"fine-tuning hurt on this file: {figures}"
    return f"no clear difference on this file: {figures}"
