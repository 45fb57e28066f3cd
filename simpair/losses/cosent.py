"""CoSENT ranking loss on cosine similarities (`objective: cosent`).

From Su (2022), "CoSENT: A more efficient sentence vector scheme than Sentence-BERT": for every two
pairs (i, j) in a batch with gold s_i > s_j, penalise cos_j > cos_i with
log(1 + sum exp(scale * (cos_j - cos_i))). It optimises the ranking of cosines, which is what Spearman
measures, instead of forcing absolute values like cosine MSE; it converges faster and usually ranks
better. scale = 20 (as in the paper and sentence-transformers). Works with graded scores and with 0/1
labels. Input: bi-encoder embeddings (u, v), targets (B,).

Example::

    loss = CoSENTLoss(scale=20.0)
    loss((u, v), torch.tensor([0.9, 0.2, 0.5]))
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simpair.losses.registry import register_objective


@register_objective("cosent")
class CoSENTLoss(nn.Module):
    """log(1 + sum_{s_i > s_j} exp(scale * (cos_j - cos_i)))."""

    kind = "bi"

    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, outputs: tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        u, v = outputs
        return ranking_loss(F.cosine_similarity(u.float(), v.float(), dim=-1) * self.scale, targets)


def ranking_loss(similarity: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log(1 + sum_{s_i > s_j} exp(sim_j - sim_i)) for already scaled similarities (B,).

    Shared by CoSENT (cosine) and AnglE (angle difference): only the similarity differs.
    """
    diff = similarity[None, :] - similarity[:, None]  # diff[i, j] = sim_j - sim_i
    ordered = targets[:, None] > targets[None, :]  # gold s_i > s_j
    diff = diff.masked_fill(~ordered, float("-inf"))
    # A leading 0 is the "1 +" inside the log; logsumexp keeps it stable.
    flat = torch.cat([torch.zeros(1, device=similarity.device), diff.flatten()])
    return torch.logsumexp(flat, dim=0)
