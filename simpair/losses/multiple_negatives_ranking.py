"""In-batch-negatives InfoNCE / multiple-negatives ranking (`objective: mnrl`).

From Henderson et al. (2017), "Efficient Natural Language Response Suggestion for Smart Reply", and the
InfoNCE of van den Oord et al. (2018): for each positive pair (a_i, b_i) in the batch, every other b_j
is a negative; the loss is cross-entropy of softmax(cos(a_i, b_.) / tau) towards b_i.

Temperature: tau = 0.05 (scale 20), the value sentence-transformers and SimCSE (Gao et al., 2021) use.
Cosines live in [-1, 1], so 1/tau sets how peaked the softmax can get: at tau = 0.007 (the minBERT
attempt that failed) logits span about +-140, the softmax is one-hot from the first step, gradients
vanish for all but the hardest negative and are huge for it, and training collapses or diverges. At
tau = 0.05 logits span +-20: still sharp enough to separate a positive from in-batch negatives, smooth
enough to give every negative a gradient. With `symmetric`, b_i -> a_i is scored too.

Only positive pairs enter (label 1, or score >= `positive_threshold`); a batch with fewer than two
positives gives a zero loss that still has a graph. Input: bi-encoder embeddings (u, v), targets (B,).

Example::

    loss = MultipleNegativesRankingLoss(scale=20.0)
    loss((u, v), torch.tensor([1.0, 1.0, 0.0, 1.0]))
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simpair.losses.registry import register_objective


@register_objective("mnrl")
class MultipleNegativesRankingLoss(nn.Module):
    """Cross-entropy over scaled in-batch cosine similarities; positives on the diagonal."""

    kind = "bi"

    def __init__(self, scale: float = 20.0, positive_threshold: float = 0.5, symmetric: bool = True) -> None:
        super().__init__()
        self.scale = scale
        self.positive_threshold = positive_threshold
        self.symmetric = symmetric

    def forward(self, outputs: tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        u, v = outputs
        keep = targets >= self.positive_threshold
        if int(keep.sum()) < 2:
            return (u.sum() + v.sum()) * 0.0
        a = F.normalize(u[keep].float(), dim=-1)
        b = F.normalize(v[keep].float(), dim=-1)
        logits = a @ b.T * self.scale
        labels = torch.arange(len(a), device=a.device)
        loss = F.cross_entropy(logits, labels)
        if self.symmetric:
            loss = (loss + F.cross_entropy(logits.T, labels)) / 2
        return loss
