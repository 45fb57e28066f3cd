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

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simpair.models.composite import CascadeSpec
from simpair.models.metadata import ModelMetadata
from simpair.models.predictor_base import CompositePredictor, MemberRaw, Raw, Texts, pair_lists

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

    def bi_probability(
        self,
        text_a: list[str],
        text_b: list[str],
        batch_size: int = 64,
        progress: bool = False,
        member_raw: MemberRaw | None = None,
    ) -> np.ndarray:
        """The bi stage's calibrated probability of every pair (its cosines from `member_raw` if given)."""
        raw = self.member_raw(BI, text_a, text_b, batch_size, progress, member_raw)
        return np.asarray(self.members[BI].from_raw(raw)["probability"], dtype=np.float32)

    def combine(self, p_bi: np.ndarray, cross: Callable[[np.ndarray], np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs from the bi probabilities and `cross(indices)`: the cross probabilities of those pairs."""
        inside = in_band(p_bi, self.spec.band_low, self.spec.band_high)
        probability = np.asarray(p_bi, dtype=np.float32).copy()
        if inside.any():
            probability[inside] = cross(np.flatnonzero(inside))
        return {**self.scores(probability), "scored_by": np.where(inside, "cross", "bi")}

    def predict(
        self,
        text_a: Sequence[str],
        text_b: Sequence[str],
        batch_size: int = 64,
        progress: bool = False,
        member_raw: MemberRaw | None = None,
    ) -> dict[str, np.ndarray]:
        """The bi stage's probability, the cross-encoder's inside the band; `scored_by` says which."""
        text_a, text_b = pair_lists(text_a, text_b)
        if not text_a:
            return self.combine(np.zeros(0, dtype=np.float32), lambda idx: idx)
        p_bi = self.bi_probability(text_a, text_b, batch_size, progress, member_raw)
        cross = self.members[CROSS]

        def cross_probability(idx: np.ndarray) -> np.ndarray:
            a, b = [text_a[i] for i in idx], [text_b[i] for i in idx]
            return cross.predict(a, b, batch_size=batch_size, progress=progress)["probability"]

        return self.combine(p_bi, cross_probability)

    def _raw(
        self, text_a: Texts, text_b: Texts, batch_size: int, progress: bool, member_raw: Raw
    ) -> np.ndarray:
        """The cascade's probability (its raw output: `from_raw` only adds the label)."""
        return self.predict(text_a, text_b, batch_size, progress, member_raw)["probability"]

    def from_raw(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        return self.scores(raw)
