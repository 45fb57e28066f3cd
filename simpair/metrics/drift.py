"""Two-sample drift figures: PSI and Kolmogorov–Smirnov on binned counts, MMD and a domain classifier
on vector samples.

The distribution figures take counts over shared fixed edges (what bounded-memory profiles keep),
never the raw values, so a night of 100M pairs costs what a night of 1k does. The KS statistic on
cumulative counts is exact wherever the edges are one value wide (token lengths up to 64) and a lower
bound elsewhere. The vector figures take two samples of a few hundred rows each.
"""

from __future__ import annotations

import numpy as np

# scipy.stats and scikit-learn are imported where a test runs, not here: every `simpair score` imports
# this module through its monitoring step, and the two cost about a second before the first pair.

# the smallest share a bin counts with in PSI: an empty bin on one side would make the log infinite
PSI_FLOOR = 1e-4


def psi(expected: np.ndarray, actual: np.ndarray, floor: float = PSI_FLOOR) -> float:
    """Population stability index between two count vectors over the same bins (NaN if either is empty).

    sum((a - e) * ln(a / e)) over bin shares, each share floored at `floor`. It is symmetric and
    reads < 0.1 stable, 0.1-0.25 moving, > 0.25 moved.
    """
    e, a = np.asarray(expected, dtype=np.float64), np.asarray(actual, dtype=np.float64)
    if e.shape != a.shape:
        raise ValueError(f"PSI needs counts over the same bins, got {e.shape} and {a.shape}")
    if e.sum() == 0 or a.sum() == 0:
        return float("nan")
    e = np.maximum(e / e.sum(), floor)
    a = np.maximum(a / a.sum(), floor)
    return float(np.sum((a - e) * np.log(a / e)))


def ks_binned(counts_a: np.ndarray, counts_b: np.ndarray) -> tuple[float, float]:
    """Two-sample Kolmogorov–Smirnov on counts over the same bins: (statistic, asymptotic p-value).

    The statistic is the largest gap between the two cumulative shares at the bin edges; the p-value
    is Kolmogorov's distribution at the effective size n*m/(n+m). NaNs when either side is empty.
    """
    a, b = np.asarray(counts_a, dtype=np.float64), np.asarray(counts_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"KS needs counts over the same bins, got {a.shape} and {b.shape}")
    n, m = a.sum(), b.sum()
    if n == 0 or m == 0:
        return float("nan"), float("nan")
    from scipy.stats import kstwo

    d = float(np.max(np.abs(np.cumsum(a) / n - np.cumsum(b) / m)))
    size = max(1, round(n * m / (n + m)))
    return d, float(kstwo.sf(d, size))


def _rbf(x: np.ndarray, y: np.ndarray, gamma: float) -> np.ndarray:
    sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T
    return np.exp(-gamma * np.maximum(sq, 0.0))


def mmd(x: np.ndarray, y: np.ndarray, permutations: int = 200, seed: int = 0) -> tuple[float, float]:
    """Squared maximum mean discrepancy with a Gaussian kernel, and its permutation p-value.

    The kernel width is the median distance over both samples (the usual heuristic), so the figure
    does not depend on the vectors' scale. p = (1 + permutations at least as large) / (1 + permutations).
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2 or len(y) < 2:
        return float("nan"), float("nan")
    z = np.concatenate([x, y])
    sq = (z * z).sum(1)[:, None] + (z * z).sum(1)[None, :] - 2 * z @ z.T
    dist = np.sqrt(np.maximum(sq[np.triu_indices(len(z), 1)], 0.0))
    median = float(np.median(dist)) or 1.0
    k = _rbf(z, z, 1.0 / (2 * median * median))
    n, m = len(x), len(y)
    # indicator rows of "in sample x": the observed split first, then the permutations, all at once
    rng = np.random.default_rng(seed)
    split = np.zeros((permutations + 1, len(z)))
    split[0, :n] = 1.0
    for p in range(1, permutations + 1):
        split[p, rng.permutation(len(z))[:n]] = 1.0
    other = 1.0 - split
    kx, ky = split @ k, other @ k
    sxx, syy, sxy = (kx * split).sum(1), (ky * other).sum(1), (kx * other).sum(1)
    # unbiased estimate: the kernel's diagonal (all ones) left out of the within-sample means
    stats = (sxx - n) / (n * (n - 1)) + (syy - m) / (m * (m - 1)) - 2 * sxy / (n * m)
    observed = float(stats[0])
    return observed, float((1 + np.sum(stats[1:] >= observed)) / (1 + permutations))


def classifier_auc(x: np.ndarray, y: np.ndarray, folds: int = 5, seed: int = 0) -> float:
    """Cross-validated ROC-AUC of a logistic regression telling sample x from sample y.

    0.5: the two samples look alike to a linear probe; 1.0: every row tells its sample. Each row is
    scored by a model that never saw it (out-of-fold predictions). NaN when a side has < `folds` rows.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < folds or len(y) < folds:
        return float("nan")
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from simpair.metrics.threshold_free import roc_auc

    z = np.concatenate([x, y])
    side = np.r_[np.zeros(len(x), dtype=np.int64), np.ones(len(y), dtype=np.int64)]
    probe = LogisticRegression(C=1.0, max_iter=1000, tol=1e-3)
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    out = cross_val_predict(probe, z, side, cv=cv, method="predict_proba")[:, 1]
    return roc_auc(side, out)
