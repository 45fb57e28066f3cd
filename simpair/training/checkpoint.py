"""Which weights a training keeps: dev metrics each epoch, the best epoch, the average of the last k.

The loop reports each epoch's dev metric to `BestWeights`, which keeps the best epoch's weights in
memory (and, with `average_last_checkpoints`, the last k epochs' weights) and counts the epochs
without improvement for early stopping. At the end `choose` loads the best epoch's weights, or the
average of the last k when that averaged model is better on dev.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from simpair.metrics.binary_classification import best_threshold, binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.pair_tokens import PairTokens
from simpair.training.averaging import average_states
from simpair.training.config import TrainConfig


def dev_scores(raw: np.ndarray, kind: str) -> np.ndarray:
    """Raw outputs on the score scale used for selection (sigmoid for cross; cosine for bi)."""
    return 1 / (1 + np.exp(-raw)) if kind == "cross" else raw


def dev_metrics(raw: np.ndarray, pairs: PairTokens, config: TrainConfig) -> dict[str, float]:
    """The dev metrics a training selects on (the threshold chosen on these pairs for paraphrase)."""
    scores = dev_scores(raw, config.kind)
    if config.task == "paraphrase":
        labels = pairs.labels if (pairs.labels >= 0).all() else (pairs.targets >= 0.5).astype(np.int64)
        threshold = best_threshold(scores, labels, config.threshold_metric)
        return binary_metrics(scores, labels, threshold)
    return graded_metrics(np.clip(scores, 0, 1) if config.kind == "cross" else scores, pairs.targets)


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the weights on the CPU (kept while training goes on)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def weights_sha1(model: nn.Module) -> str:
    """Fingerprint of a module's weights (checks that DDP ranks stayed in sync)."""
    digest = hashlib.sha1()
    for key, value in sorted(model.state_dict().items()):
        digest.update(key.encode())
        digest.update(value.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def better(new: float, old: float | None) -> bool:
    """Higher is better; NaN never is."""
    return old is None or (not math.isnan(new) and new > old)


class BestWeights:
    """The best epoch's weights so far, the last `average_last` epochs' weights, and the patience count."""

    def __init__(self, average_last: int = 0) -> None:
        self.average_last = average_last
        self.value: float | None = None
        self.state: dict[str, torch.Tensor] | None = None
        self.epoch = 0
        self.recent: list[dict[str, torch.Tensor]] = []
        self.bad_epochs = 0

    def observe(self, epoch: int, value: float, model: nn.Module) -> None:
        """Record one epoch's dev value for the model's current weights."""
        if better(value, self.value):
            self.value, self.state, self.epoch, self.bad_epochs = value, snapshot(model), epoch, 0
        else:
            self.bad_epochs += 1
        if self.average_last > 1:
            self.recent = [*self.recent, snapshot(model)][-self.average_last :]

    def should_stop(self, patience: int | None) -> bool:
        return patience is not None and self.bad_epochs >= patience

    def choose(self, model: nn.Module, score: Callable[[nn.Module], float]) -> str:
        """Load the kept weights into `model`; returns which (`best_epoch` or `average_of_last_<k>`).

        `score` gives a model's dev selection metric; the average of the recent epochs replaces the
        best epoch only when it scores better.
        """
        assert self.state is not None
        chosen = "best_epoch"
        model.load_state_dict(self.state)
        if len(self.recent) > 1:
            candidate = copy.deepcopy(model)
            candidate.load_state_dict(average_states(self.recent))
            averaged = score(candidate)
            if better(averaged, self.value):
                model.load_state_dict(candidate.state_dict())
                chosen = f"average_of_last_{len(self.recent)}"
                self.value = averaged
        return chosen
