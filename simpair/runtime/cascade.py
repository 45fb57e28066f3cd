"""Run a bi -> cross cascade: a bi-encoder scores every pair, the cross-encoder only the uncertain ones.

Pairs whose bi probability lies inside the model's uncertainty band (`cascade.json`, fitted on dev by
`simpair.ensemble.cascade_fit`) go to the cross-encoder; the rest keep the bi stage's calibrated
probability. Every output row says which stage scored it (`scored_by`: `bi` or `cross`). One threshold
decides every row: the cross-encoder's own, applied to whichever probability the row has. Loaded by
`simpair.runtime.loader`, like every model.

Layout of a cascade model directory (everything text or safetensors, nothing pickled):

    simpair.json       kind "cascade", task paraphrase, threshold (the cross-encoder's), max_length
    cascade.json       members (bi first, then cross), the band, and its dev figures
    members/0-<bi>     the bi stage, a complete model directory (its calibration in its simpair.json)
    members/1-<cross>  the cross stage, a complete model directory
    metrics.json, dev_pair_ids.txt, train_pairs.txt (dev pairs count as training data for leakage)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from simpair.models.composite import CascadeSpec
from simpair.models.metadata import ModelMetadata
from simpair.models.predictor_base import Call, CompositePredictor, Texts

BI, CROSS = 0, 1  # member indices: the bi stage first, the cross-encoder second


def in_band(p_bi: np.ndarray, low: float, high: float) -> np.ndarray:
    """Which pairs the cross-encoder scores: bi probability strictly inside (low, high)."""
    p_bi = np.asarray(p_bi, dtype=np.float64)
    return (p_bi > low) & (p_bi < high)


class CascadePredictor(CompositePredictor):
    """Same public surface as `simpair.models.Predictor`; `predict` adds `scored_by` per pair."""

    DEVICE_MEMBER = CROSS
    spec: CascadeSpec

    def __init__(
        self, meta: ModelMetadata, spec: CascadeSpec, members: list[Any], model_dir: Path | None = None
    ) -> None:
        if len(members) != 2 or members[BI].kind != "bi" or members[CROSS].kind != "cross":
            kinds = [getattr(m, "kind", "?") for m in members]
            raise ValueError(f"a cascade is a bi-encoder then a cross-encoder, got {kinds}")
        super().__init__(meta, spec, members, model_dir)

    def bi_probability(self, text_a: Texts, text_b: Texts, call: Call = Call()) -> np.ndarray:
        """The bi stage's calibrated probability of each pair (cosines from `call.member_raw` if given)."""
        raw = self.member_raw(BI, text_a, text_b, call)
        return np.asarray(self.members[BI].from_raw(raw)["probability"], dtype=np.float32)

    def combine(self, p_bi: np.ndarray, cross: Callable[[np.ndarray], np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs from the bi probabilities and `cross(indices)`: the cross probabilities of those pairs."""
        inside = in_band(p_bi, self.spec.band_low, self.spec.band_high)
        probability = np.asarray(p_bi, dtype=np.float32).copy()
        if inside.any():
            probability[inside] = cross(np.flatnonzero(inside))
        return {**self.scores(probability), "scored_by": np.where(inside, "cross", "bi")}

    def _predict(self, text_a: Texts, text_b: Texts, call: Call) -> dict[str, np.ndarray]:
        """The bi stage's probability, the cross-encoder's inside the band; `scored_by` says which."""
        if not text_a:
            return self.combine(np.zeros(0, dtype=np.float32), lambda idx: idx)
        cross = self.members[CROSS]

        def cross_probability(idx: np.ndarray) -> np.ndarray:
            a, b = [text_a[i] for i in idx], [text_b[i] for i in idx]
            return cross.predict(a, b, batch_size=call.batch_size, progress=call.progress)["probability"]

        return self.combine(self.bi_probability(text_a, text_b, call), cross_probability)

    def _raw(self, text_a: Texts, text_b: Texts, call: Call) -> np.ndarray:
        """The cascade's probability (its raw output: `from_raw` only adds the label)."""
        return self._predict(text_a, text_b, call)["probability"]

    def from_raw(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        return self.scores(raw)
