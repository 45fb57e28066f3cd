"""Run a stacked model directory: members' raw outputs (+ their products, lexical
features) -> linear model.

Layout of a stacked model directory (everything text or safetensors, nothing pickled):

    simpair.json       kind "stacked", task, threshold, max_length (the members' largest)
    stack.json         members (relative dirs), feature names, standardisation, coefficients
    members/<i>-<name> complete member model directories, so the directory is self-contained
    metrics.json, dev_pair_ids.txt, train_pairs.txt (members' and dev pairs: leakage exclusion)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simpair.models.composite import StackSpec
from simpair.models.metadata import ModelMetadata
from simpair.models.predictor_base import Call, CompositePredictor, Side, Texts
from simpair.runtime.stack_features import LEXICAL_FEATURES, lexical_features, parse_product


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class StackedPredictor(CompositePredictor):
    """Same public surface as `simpair.models.Predictor` (predict, predict_raw, truncated, ...)."""

    spec: StackSpec

    def __init__(
        self, meta: ModelMetadata, spec: StackSpec, members: list[Any], model_dir: Path | None = None
    ) -> None:
        if len(members) != len(spec.members):
            raise ValueError(f"stack expects {len(spec.members)} members, got {len(members)}")
        super().__init__(meta, spec, members, model_dir)

    def features(self, text_a: Side, text_b: Side, call: Call = Call()) -> np.ndarray:
        """The (n, len(spec.features)) matrix the combiner was fitted on.

        `call.member_raw` replaces member i's `predict_raw` with `member_raw[i]` (scoring gives
        bi-encoder members their cosines from the embedding store); it must return the same raw scores.
        """
        text_a, text_b = list(text_a), list(text_b)
        columns: dict[str, np.ndarray] = {}
        for i in range(len(self.members)):
            raw = self.member_raw(i, text_a, text_b, call)
            columns[f"member:{i}"] = np.asarray(raw, dtype=np.float64)
        if any(name in LEXICAL_FEATURES for name in self.spec.features):
            lexical = lexical_features(text_a, text_b)
            for j, name in enumerate(LEXICAL_FEATURES):
                columns[name] = lexical[:, j]
        for name in self.spec.features:
            if name.startswith("product:"):
                i, j = parse_product(name)
                if max(i, j) >= len(self.members):
                    raise ValueError(f"stack feature {name!r}: the stack has {len(self.members)} members")
                columns[name] = columns[f"member:{i}"] * columns[f"member:{j}"]
        return np.column_stack([columns[name] for name in self.spec.features])

    def combine(self, features: np.ndarray) -> np.ndarray:
        """The combiner's raw output: a 0-1 score (ridge) or a logit (logistic)."""
        x = (features - np.asarray(self.spec.mean)) / np.asarray(self.spec.scale)
        return (x @ np.asarray(self.spec.coef) + self.spec.intercept).astype(np.float32)

    def _raw(self, text_a: Texts, text_b: Texts, call: Call) -> np.ndarray:
        return self.combine(self.features(text_a, text_b, call))

    def from_raw(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        """Ridge: the score clipped to [0, 1]; logistic: the logit's sigmoid (a paraphrase probability)."""
        raw = np.asarray(raw, dtype=np.float64)
        if self.spec.combiner == "ridge":
            return self.scores(np.clip(raw, 0.0, 1.0))
        return self.scores(_sigmoid(raw))
