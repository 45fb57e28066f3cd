"""Binary cross-entropy on a cross-encoder's single logit (`objective: bce`).

What it optimises: log-loss of sigmoid(logit) against the target, which may be a 0/1 paraphrase label
or a soft 0-1 similarity score (graded data is then a Bernoulli target, as in sentence-transformers'
`CrossEncoder` with `num_labels=1`). sigmoid(logit) is thus a probability (paraphrase) or a 0-1 score
(graded) at prediction time. Input: cross-encoder logits (B,), targets (B,).

Example::

    loss = BinaryCrossEntropyLoss()
    loss(model(**batch), torch.tensor([1.0, 0.0, 0.6]))
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simpair.losses.registry import register_objective


@register_objective("bce")
class BinaryCrossEntropyLoss(nn.Module):
    """BCE-with-logits; `pos_weight` > 1 up-weights positives (MSRP is 2:1 positive, so rarely needed)."""

    kind = "cross"

    def __init__(self, pos_weight: float | None = None) -> None:
        super().__init__()
        self.pos_weight = pos_weight

    def forward(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        weight = None if self.pos_weight is None else torch.tensor(self.pos_weight, device=outputs.device)
        return F.binary_cross_entropy_with_logits(outputs.float(), targets.float(), pos_weight=weight)
