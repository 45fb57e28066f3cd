"""Weight-space ensembles chosen on dev: average of the last checkpoints, or WiSE-FT interpolation.

WiSE-FT (Wortsman et al., 2022, "Robust fine-tuning of zero-shot models"): the weights
alpha * fine-tuned + (1 - alpha) * pre-trained often beat both ends, because the pre-trained model's
general similarity knowledge is kept while the fine-tuned one adds the task. alpha is chosen on dev,
never on test; alpha = 1 (plain fine-tuning) is always a candidate, so it can only help on dev.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn


def average_states(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of floating-point tensors (integer buffers from the last state)."""
    out = {}
    for key in states[0]:
        if states[0][key].is_floating_point():
            out[key] = torch.stack([s[key] for s in states]).mean(0)
        else:
            out[key] = states[-1][key]
    return out


def interpolate(
    base: dict[str, torch.Tensor], tuned: dict[str, torch.Tensor], alpha: float
) -> dict[str, torch.Tensor]:
    """alpha * tuned + (1 - alpha) * base for shared floating-point tensors (others from tuned)."""
    out = {}
    for key, value in tuned.items():
        if value.is_floating_point() and key in base and base[key].shape == value.shape:
            out[key] = alpha * value + (1 - alpha) * base[key].to(value.dtype)
        else:
            out[key] = value
    return out


def choose_interpolation(
    model: nn.Module,
    base: dict[str, torch.Tensor],
    alphas: Sequence[float],
    score: Callable[[nn.Module], float],
) -> tuple[float, dict[float, float]]:
    """Load the dev-best interpolation into `model`; returns (alpha, {alpha: dev score})."""
    tuned = {k: v.detach().clone() for k, v in model.state_dict().items()}
    results: dict[float, float] = {}
    for alpha in sorted(set(alphas) | {1.0}, reverse=True):
        model.load_state_dict(interpolate(base, tuned, alpha))
        results[alpha] = float(score(model))
    best = max(results, key=lambda a: (results[a], a))  # ties: the more fine-tuned weights
    model.load_state_dict(interpolate(base, tuned, best))
    return best, results
