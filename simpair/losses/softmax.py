"""Softmax classifier on (u, v, |u - v|) (`objective: softmax`).

From Sentence-BERT (Reimers & Gurevych, 2019): the two mean-pooled embeddings u and v are
concatenated with their element-wise difference and classified by a linear layer trained with
cross-entropy. The classifier is used only for training; at inference it is dropped and the cosine of
u and v is the score, so this objective shapes the embedding space indirectly. Input: bi-encoder
embeddings (u, v), integer class targets (B,) (0/1 for paraphrase).

Example::

    loss = SoftmaxLoss(hidden_size=384, num_labels=2)
    loss((u, v), torch.tensor([1.0, 0.0]))
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simpair.losses.registry import register_objective


@register_objective("softmax")
class SoftmaxLoss(nn.Module):
    """Linear(3H -> num_labels) on (u, v, |u-v|) with cross-entropy."""

    kind = "bi"
    needs_hidden_size = True

    def __init__(self, hidden_size: int, num_labels: int = 2) -> None:
        super().__init__()
        self.classifier = nn.Linear(3 * hidden_size, num_labels)

    def forward(self, outputs: tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        u, v = outputs
        features = torch.cat([u, v, (u - v).abs()], dim=-1)
        logits = self.classifier(features.float())
        return F.cross_entropy(logits, targets.round().long())
