"""A fast precision whose decisions stay fp32's: pairs near the threshold are scored again in fp32.

bf16 and int8 move a cross-encoder's logits by a little everywhere, but a decision changes only where
a pair sits closer to the threshold than that error. On the MSRP cross-encoder bf16 on OpenVINO moved
dev logits by at most 0.18 (2026-11-27), and only 3.7% of dev pairs lay within three times that of
the threshold: so scoring every pair in bf16 and those few again in fp32 kept fp32's decisions at
most of bf16's speed (on 2,997 pairs of other splits 1.5-1.75x fp32 against 1.8-1.9x for bf16 alone; 0
of them flipped, against 3 for bf16 alone; docs/experiments.md; the band was then three times the
largest change).

The band is fitted once by the precision ladder on the model's dev split (`fit_band`: `FACTOR` times
the 99th percentile of the raw changes it saw, and never so narrow that a pair it flipped on dev lies
outside), recorded in the rung of the precision verdict, and applied by every run that loads the model
in that precision (`simpair.runtime.loader`); the decisions its limits judge are cross-fitted
(`cross_fitted`). A percentile, not the largest change: one pair sets the largest, and a trained
cross-encoder's logits saturate a few units from its cut, so a band three times one outlier's change
can hold most pairs and cost more than the fast rung saves. On the MSRP cross-encoder in per-row int8
(2026-11-29) the largest dev change was 2.1 logits, three times the 99th percentile's 0.68: the
percentile's band held 9% of dev, the largest's more than three quarters; fitted on MSRP dev, it left
none of 1,497 STS-B dev pairs flipped (17 without a recheck).

Paraphrase cross-encoders and stacks only (`raw_cut`): their raw output is what the threshold cuts,
and every pair goes through `predict_raw`. A bi-encoder's pairs may come from the embedding store and
a cascade routes pairs between its stages, which this wrapper would not see.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simpair.models.predictor_base import BasePredictor, Call, Texts

FACTOR = 3.0  # band = FACTOR x the QUANTILE of the dev logit changes
QUANTILE = 0.99  # fewer than 1 in 100 dev pairs move further than a third of the band
MAX_SHARE = 0.25  # a band holding more of dev than this costs more fp32 passes than the fast rung saves


def threshold_logit(threshold: float) -> float:
    """The logit a cross-encoder's decision threshold (a probability) cuts at."""
    p = min(max(float(threshold), 1e-7), 1 - 1e-7)
    return float(np.log(p / (1 - p)))


@dataclass(frozen=True)
class Band:
    """Logits within `width` of the threshold's are scored again in fp32; `share` of dev pairs were."""

    width: float
    share: float


def fit_band(exact: np.ndarray, fast: np.ndarray, cut: float, factor: float = FACTOR) -> Band:
    """The band for one fast runtime, from its raw outputs and fp32's on the same dev pairs (`cut`:
    where the raw output meets the threshold, `raw_cut`)."""
    fast, exact = np.asarray(fast, np.float64), np.asarray(exact, np.float64)
    width = factor * float(np.quantile(np.abs(fast - exact), QUANTILE)) if fast.size else 0.0
    flipped = (fast >= cut) != (exact >= cut)
    if flipped.any():  # never narrower than the pairs it flipped: they are what the band is for
        width = max(width, float(np.nextafter(np.abs(fast[flipped] - cut).max(), np.inf)))
    share = float(np.mean(np.abs(fast - cut) < width))
    return Band(width, share)


def raw_cut(predictor: Any) -> float | None:
    """Where a paraphrase model's raw output crosses its threshold: the threshold's logit for a
    cross-encoder or a logistic stack, the threshold itself for a ridge stack; None for models whose
    pairs do not all pass through `predict_raw` (bi-encoders read the embedding store, cascades route)."""
    if getattr(predictor, "task", None) != "paraphrase":
        return None
    kind = getattr(predictor, "kind", None)
    if kind == "stacked" and predictor.spec.combiner == "ridge":
        return float(predictor.threshold)
    return threshold_logit(predictor.threshold) if kind in ("cross", "stacked") else None


def cross_fitted(exact: np.ndarray, fast: np.ndarray, cut: float, factor: float = FACTOR) -> np.ndarray:
    """The rechecked raw outputs of the dev pairs, each half (alternate pairs) with the band fitted on
    the other half: decisions judged out of sample (a band fitted on all pairs holds every pair the
    fast runtime flips, so judging it on them would prove nothing)."""
    exact, fast = np.asarray(exact, np.float64), np.asarray(fast, np.float64)
    halves = np.arange(len(fast)) % 2 == 0
    out = fast.copy()
    for held_out in (halves, ~halves):
        if not held_out.any() or held_out.all():
            continue
        width = fit_band(exact[~held_out], fast[~held_out], cut, factor).width
        near = held_out & (np.abs(fast - cut) < width)
        out[near] = exact[near]
    return out


def supports(predictor: Any) -> bool:
    """Whether a model's decisions can be rechecked: a paraphrase cross-encoder or stack."""
    return raw_cut(predictor) is not None


class ThresholdRecheck(BasePredictor):
    """`fast`'s forward pass, with the pairs it puts within `band` of the threshold scored by `exact`.

    Everything else (tokenizer, threshold, truncation, precision, variant) is `fast`'s, so scoring
    records the run's precision on every row; `rechecked` counts the pairs `exact` scored. `exact`
    is a predictor, or a function building one: then it is built when a pair first falls in the band
    (most batches have none near a threshold, and a load would otherwise pay for a second graph
    before the first pair is scored); `exact_built` says whether it has been.
    """

    def __init__(self, fast: Any, exact: Any | Callable[[], Any], band: float) -> None:
        cut = raw_cut(fast)
        if cut is None:
            raise TypeError(f"a {fast.kind} {fast.task} model cannot be rechecked near its threshold")
        self.fast, self.band, self.cut = fast, float(band), cut
        built = hasattr(exact, "predict_raw")
        self._exact: Any = exact if built else None
        self._build: Callable[[], Any] | None = None if built else exact
        self._lock = threading.Lock()
        self.rechecked = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("fast", "_exact", "_build", "_lock"):  # probe before __init__
            raise AttributeError(name)
        return getattr(self.fast, name)

    @property
    def exact_built(self) -> bool:
        return self._exact is not None

    @property
    def exact(self) -> Any:
        """The fp32 predictor, built now if it was given as a function (once, whichever thread asks)."""
        if self._exact is None:
            with self._lock:
                if self._exact is None:
                    assert self._build is not None
                    self._exact = self._build()
        return self._exact

    @property
    def variant(self) -> str:
        return f"{getattr(self.fast, 'variant', 'torch')}+fp32-recheck"

    def _raw(self, text_a: Texts, text_b: Texts, call: Call) -> np.ndarray:
        """`call.member_raw` (a stack's bi members' cosines from the embedding store) goes to the fast
        pass; the fp32 pass computes its own."""
        batch_size = call.batch_size
        raw = np.array(self.fast.predict_raw(text_a, text_b, batch_size, call.progress, call.member_raw))
        near = np.flatnonzero(np.abs(raw.astype(np.float64) - self.cut) < self.band)
        if near.size:
            a, b = [text_a[i] for i in near], [text_b[i] for i in near]
            raw[near] = self.exact.predict_raw(a, b, batch_size=batch_size)
            self.rechecked += int(near.size)
        return raw

    def from_raw(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        return self.fast.from_raw(raw)

    def truncated(self, text_a: Sequence[str], text_b: Sequence[str]) -> np.ndarray:
        return self.fast.truncated(text_a, text_b)
