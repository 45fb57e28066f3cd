"""AnglE: CoSENT on cosines plus CoSENT on angle differences in complex space (`objective: angle`).

From Li & Li (2024), "AnglE-optimized Text Embeddings" (ACL): cosine has flat gradients near +-1
(saturation), where many STS pairs sit after pre-training; splitting each embedding into a real and an
imaginary half and ranking pairs by the normalised angle difference of the complex vectors keeps a
gradient there. The angle term is the one in the paper and in sentence-transformers' `AnglELoss`
(`pairwise_angle_sim`); it is added to the CoSENT term here (the paper's objective sums weighted terms)
so the cosine, which is what prediction uses, stays directly optimised. Prediction is still the cosine.

Example::

    loss = AnglELoss(scale=20.0, angle_weight=1.0)
    loss((u, v), torch.tensor([0.9, 0.2, 0.5]))
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simpair.losses.cosent import ranking_loss
from simpair.losses.registry import register_objective


def angle_similarity(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """|Re + Im summed over u * conj(v)| / (|u| |v|), halves of each vector as real and imaginary parts.

    The same value as sentence-transformers' `pairwise_angle_sim` (divide u by v in complex space, then
    normalise by |u| / |v|), written without the intermediate division.
    """
    a, b = torch.chunk(u, 2, dim=-1)
    c, d = torch.chunk(v, 2, dim=-1)
    real_plus_imag = (a * c + b * d + b * c - a * d).sum(dim=-1)
    return (real_plus_imag / (u.norm(dim=-1) * v.norm(dim=-1))).abs()


@register_objective("angle")
class AnglELoss(nn.Module):
    """ranking(scale * cos) + angle_weight * ranking(scale * angle_similarity)."""

    kind = "bi"

    def __init__(self, scale: float = 20.0, angle_weight: float = 1.0) -> None:
        super().__init__()
        self.scale = scale
        self.angle_weight = angle_weight

    def forward(self, outputs: tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        u, v = (x.float() for x in outputs)
        loss = ranking_loss(F.cosine_similarity(u, v, dim=-1) * self.scale, targets)
        if self.angle_weight:
            loss = loss + self.angle_weight * ranking_loss(angle_similarity(u, v) * self.scale, targets)
        return loss
