"""Cosine-similarity regression (`objective: cosine_mse`).

What it optimises: mean squared error between cos(u, v) and the gold score in 0-1 (or the 0/1 label).
The loss used by the STR-2022 prior work and by sentence-transformers' `CosineSimilarityLoss`; minBERT
found it beat a linear head for STS. Because the target is the cosine itself, predictions are
directly on the score scale (clipped to [0, 1]). Input: bi-encoder embeddings (u, v), targets (B,).

Example::

    loss = CosineSimilarityLoss()
    loss((u, v), torch.tensor([0.8, 0.1]))
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simpair.losses.registry import register_objective


@register_objective("cosine_mse")
class CosineSimilarityLoss(nn.Module):
    """MSE(cos(u, v), target)."""

    kind = "bi"

    def forward(self, outputs: tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        u, v = outputs
        return F.mse_loss(F.cosine_similarity(u.float(), v.float(), dim=-1), targets.float())
