"""Online contrastive loss for binary labels (`objective: online_contrastive`).

The contrastive loss of Hadsell, Chopra & LeCun (2006), "Dimensionality Reduction by Learning an
Invariant Mapping", on cosine distance d = 1 - cos(u, v): positives are pulled to d = 0, negatives
pushed beyond a margin. "Online" (as in sentence-transformers' `OnlineContrastiveLoss`) means only
the hard cases in the batch count: positives farther apart than the closest negative, and negatives
closer than the farthest positive. Easy pairs add nothing, so the gradient goes where the decision
boundary is. Input: bi-encoder embeddings (u, v), 0/1 targets (B,).

Example::

    loss = OnlineContrastiveLoss(margin=0.5)
    loss((u, v), torch.tensor([1.0, 0.0, 1.0]))
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simpair.losses.registry import register_objective


@register_objective("online_contrastive")
class OnlineContrastiveLoss(nn.Module):
    """sum over hard positives of d^2 + sum over hard negatives of relu(margin - d)^2."""

    kind = "bi"

    def __init__(self, margin: float = 0.5, positive_threshold: float = 0.5) -> None:
        super().__init__()
        self.margin = margin
        self.positive_threshold = positive_threshold

    def forward(self, outputs: tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        u, v = outputs
        distance = 1 - F.cosine_similarity(u.float(), v.float(), dim=-1)
        positive = targets >= self.positive_threshold
        pos, neg = distance[positive], distance[~positive]
        if len(pos) == 0 or len(neg) == 0:  # no contrast in this batch: use every pair
            hard_pos, hard_neg = pos, neg
        else:
            hard_pos = pos[pos > neg.min()]
            hard_neg = neg[neg < pos.max()]
        loss = hard_pos.pow(2).sum() + F.relu(self.margin - hard_neg).pow(2).sum()
        return loss + distance.sum() * 0.0  # keep a graph even when no pair is hard
