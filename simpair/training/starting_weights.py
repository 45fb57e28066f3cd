"""The encoder's weights as training found them, and two ways back toward them: L2-SP and WiSE-FT.

Fine-tuning on a few thousand pairs buys the training domain and gives back some of what the
pre-trained backbone knew about every other domain. Two remedies from the literature keep the
fine-tune near its starting point:

- **L2-SP** (Li, Grandvalet and Davoine 2018, "Explicit Inductive Bias for Transfer Learning with
  Convolutional Networks"): during training, a penalty alpha/2 * ||w - w0||^2 over the encoder instead
  of (or beside) plain weight decay, which pulls toward zero and so says nothing about what the
  backbone learnt. Its gradient, alpha * (w - w0), is added after the backward pass: the same update as
  a loss term, without growing the autograd graph, and the same on every DDP rank.
- **WiSE-FT** (Wortsman et al. 2022, "Robust fine-tuning of zero-shot models"): after training, the
  weights w0 + alpha * (w - w0), between the starting and the fine-tuned weights.

Heads the backbone never had (a cross-encoder's classifier) are neither pulled nor interpolated.
"""

from __future__ import annotations

import torch
from torch import nn


class StartingWeights:
    """A copy of the encoder's weights at the start of training, paired with the live parameters."""

    def __init__(self, encoder: nn.Module) -> None:
        self.pairs = [(p, p.detach().clone()) for p in encoder.parameters()]

    @torch.no_grad()
    def pull(self, alpha: float) -> None:
        """L2-SP: add alpha * (w - w0) to each encoder gradient (call between backward and step)."""
        for param, start in self.pairs:
            if param.grad is not None:
                param.grad.add_(param - start, alpha=alpha)

    @torch.no_grad()
    def interpolate(self, alpha: float) -> None:
        """WiSE-FT in place: w <- w0 + alpha * (w - w0); alpha 1 keeps the fine-tune, 0 the start."""
        for param, start in self.pairs:
            param.copy_(start + alpha * (param - start))

    @torch.no_grad()
    def distance(self) -> float:
        """||w - w0|| / ||w0|| over the encoder: how far training has moved it (kept in the metrics)."""
        moved = sum(float((p - s).pow(2).sum()) for p, s in self.pairs)
        size = sum(float(s.pow(2).sum()) for _, s in self.pairs)
        return (moved / max(size, 1e-12)) ** 0.5
