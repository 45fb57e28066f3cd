"""A bi -> cross cascade's band: which pairs the cheap bi-encoder keeps and which go to the cross-encoder.

Most pairs of a real batch are far from the decision boundary (near-duplicates, unrelated texts), and a
bi-encoder scores those at the speed of the embedding store, while a cross-encoder pays a full forward
pass per pair. Retrieval systems have long run a cheap model first and an expensive one where it
matters ("retrieve and re-rank"); here the cheap stage's *calibrated probability* decides: pairs whose
bi probability lies inside an uncertainty band, fitted on dev (`simpair.ensemble.cascade_fit`), go to
the cross-encoder; the rest keep the bi stage's probability. Every output row says which stage scored
it (`scored_by`: `bi` or `cross`). The predictor that runs it is `simpair.runtime.cascade`; this module
holds the band's rule and its fit, and the check of a cascade against its own cross-encoder.

One threshold decides every row: the cross-encoder's own (its dev-fitted threshold), applied to the
cross-encoder's probability inside the band and to the bi stage's calibrated probability outside it.
The band is chosen so those decisions differ from the full cross-encoder's on at most a set share
(`max_disagreement`) of pairs it has not seen. The narrowest band within that share *of the dev pairs*
is chosen where its misses happen to be few (on 408 MSRP dev pairs, 0.5% is 2 pairs; MSRP test then
showed 1-1.4%), so the default rule is conformal risk control (Angelopoulos et al., 2022): with k dev
misses left outside the band, (k + 1) / (n + 1) <= max_disagreement. For a nested family of bands that
bounds the expected share on new pairs of the same distribution; for the narrowest-band search it comes
close (fitted on random halves of MSRP dev, 0.60% on the other halves against 1.24% for the share of dev
itself). Too few dev pairs to certify the share send every pair to the cross-encoder
(docs/experiments.md, 2026-11-26).

A cascade model directory's layout is in `simpair.runtime.cascade`, which runs it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simpair.models.composite import (
    DEFAULT_BAND_RULE,
    BandRule,
)
from simpair.models.predictor_base import Call
from simpair.runtime.cascade import CROSS, CascadePredictor, in_band


def band_figures(
    p_bi: np.ndarray, cross_labels: np.ndarray, threshold: float, low: float, high: float
) -> tuple[float, float]:
    """(share sent to the cross-encoder, share of decisions that differ from its) of a band on pairs."""
    inside = in_band(p_bi, low, high)
    if not len(inside):
        return 0.0, 0.0
    decisions = np.where(inside, np.asarray(cross_labels).astype(bool), np.asarray(p_bi) >= threshold)
    return float(inside.mean()), float(np.mean(decisions != np.asarray(cross_labels).astype(bool)))


@dataclass(frozen=True)
class Band:
    """A fitted band and what it does on the pairs it was fitted on."""

    low: float
    high: float
    share_to_cross: float
    disagreement: float
    pairs: int
    rule: BandRule = DEFAULT_BAND_RULE
    allowed_misses: int = 0  # -1: the rule cannot certify the share on this few pairs (full band)


def allowed_misses(n: int, max_disagreement: float, rule: BandRule = DEFAULT_BAND_RULE) -> int:
    """How many of n fitting pairs a band may leave with a decision other than the cross-encoder's.

    "crc" (conformal risk control): the largest k with (k + 1) / (n + 1) <= max_disagreement, -1 when
    even k = 0 is over (n + 1 < 1 / max_disagreement). "point": floor(max_disagreement * n).
    """
    if rule == "crc":
        return math.floor(max_disagreement * (n + 1) + 1e-9) - 1
    if rule == "point":
        return math.floor(max_disagreement * n + 1e-9)
    raise ValueError(f"band rule must be crc or point, got {rule!r}")


def fit_band(
    p_bi: np.ndarray,
    cross_labels: np.ndarray,
    threshold: float,
    max_disagreement: float,
    rule: BandRule = DEFAULT_BAND_RULE,
) -> Band:
    """The narrowest band whose cascade decisions differ from `cross_labels` on at most
    `allowed_misses(n, max_disagreement, rule)` of the n pairs (every pair when that is -1).

    Narrowest means fewest pairs inside (the share the cross-encoder must score: what costs time), then
    the smallest width. Outside the band a pair's decision is `p_bi >= threshold`; inside it is the
    cross-encoder's, so a band removes exactly the disagreements it covers. Edges sit halfway between
    neighbouring distinct probabilities (or beyond 0 and 1), never on one pair's value; tied
    probabilities are inside or outside together. O(n log n).
    """
    p = np.asarray(p_bi, dtype=np.float64)
    n = len(p)
    if n == 0:
        raise ValueError("fitting a cascade band needs dev pairs")
    if not 0.0 <= max_disagreement < 1.0:
        raise ValueError(f"max_disagreement must be in [0, 1), got {max_disagreement}")
    wrong = (p >= threshold) != np.asarray(cross_labels).astype(bool)
    allowed = allowed_misses(n, max_disagreement, rule)
    if allowed < 0:  # too few pairs to certify the share: the cross-encoder scores every pair
        return Band(-1.0, 2.0, 1.0, 0.0, n, rule, allowed)
    total = int(wrong.sum())
    if total <= allowed:  # the bi stage alone agrees well enough: an empty band at the threshold
        return Band(threshold, threshold, 0.0, total / n, n, rule, allowed)
    order = np.argsort(p, kind="stable")
    ps, covered = p[order], np.concatenate([[0], np.cumsum(wrong[order])])
    # a band covers sorted positions [i, j); cuts only between distinct values
    cuts = np.flatnonzero(np.concatenate([[True], ps[1:] > ps[:-1], [True]]))  # positions 0..n
    need = total - allowed
    starts = cuts[cuts < n]
    # smallest j with covered[j] - covered[i] >= need, moved up to the next cut
    j = np.searchsorted(covered, covered[starts] + need, side="left")
    ok = j <= n
    starts, j = starts[ok], j[ok]
    j = cuts[np.minimum(np.searchsorted(cuts, j, side="left"), len(cuts) - 1)]
    width = ps[j - 1] - ps[starts]
    best = np.lexsort((width, j - starts))[0]
    i, j = int(starts[best]), int(j[best])
    low = -1.0 if i == 0 else float((ps[i - 1] + ps[i]) / 2)
    high = 2.0 if j == n else float((ps[j - 1] + ps[j]) / 2)
    outside = np.ones(n, dtype=bool)
    outside[order[i:j]] = False
    return Band(low, high, (j - i) / n, float(wrong[outside].sum()) / n, n, rule, allowed)


@dataclass(frozen=True)
class CrossAgreement:
    """A cascade against its own full cross-encoder on some pairs (the gate's test-split check)."""

    pairs: int
    share_to_cross: float
    disagreement: float  # share of pairs whose cascade decision differs from the cross-encoder's
    cascade: dict[str, np.ndarray]
    cross: dict[str, np.ndarray]


def compare_with_cross(
    predictor: CascadePredictor, text_a: Sequence[str], text_b: Sequence[str], batch_size: int = 64
) -> CrossAgreement:
    """Score pairs with the cascade and with its cross-encoder alone (each pair through the cross once)."""
    text_a, text_b = list(text_a), list(text_b)
    p_bi = predictor.bi_probability(text_a, text_b, Call(batch_size))
    full = predictor.members[CROSS].predict(text_a, text_b, batch_size=batch_size)
    cascade = predictor.combine(p_bi, lambda idx: np.asarray(full["probability"])[idx])
    n = len(text_a)
    return CrossAgreement(
        pairs=n,
        share_to_cross=float(np.mean(cascade["scored_by"] == "cross")) if n else 0.0,
        disagreement=float(np.mean(cascade["label"] != full["label"])) if n else 0.0,
        cascade=cascade,
        cross=full,
    )
