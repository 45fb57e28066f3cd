"""Bi-encoder: each text encoded alone by a shared encoder, mean-pooled, compared by cosine.

Sentence-BERT (Reimers & Gurevych, 2019, "Sentence-BERT: Sentence Embeddings using Siamese
BERT-Networks") showed mean pooling over the attention mask beats the [CLS] vector for sentence
embeddings. Embeddings are computed once per sentence, so mining and search over many sentences stay
cheap; the pair score is the cosine of the two embeddings. Training-only heads (the softmax objective's
classifier) live in the objective, not here, and are dropped at inference as in SBERT.

Models simpair trains always mean-pool. A sentence-transformers model brought as it is may pool on
[CLS] instead (BGE and other retrieval encoders do), so `pooling` is kept per model (`simpair.json`)
and [CLS] pooling reads the first token's vector, as sentence-transformers' `Pooling` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn
from transformers import AutoModel, PreTrainedModel

from simpair.models.body import body_inputs
from simpair.models.embedding_postprocess import EmbeddingPostprocess
from simpair.models.pooler import freeze_unused_pooler

Pooling = Literal["mean", "cls"]
POOLINGS: tuple[str, ...] = ("mean", "cls")


def mean_pool(token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of the token vectors where the mask is 1 (padding never counts)."""
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    summed = (token_embeddings * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-9)
    return summed / counts


class BiEncoder(nn.Module):
    """Shared-weight sentence encoder; `forward` returns pooled embeddings of shape (B, H) (mean or [CLS])."""

    kind = "bi"

    def __init__(
        self, model: PreTrainedModel, post: EmbeddingPostprocess | None = None, pooling: Pooling = "mean"
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.model = model
        self.pooling = pooling
        # Mean pooling never reads the body's pooler: frozen, so DDP and the optimiser skip it.
        freeze_unused_pooler(model)
        # Fitted after training (simpair.models.embedding_postprocess); None while training and for
        # plain backbones.
        self.post = post

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, pooling: Pooling = "mean") -> BiEncoder:
        """Any local directory or hub id (never remote code), with its saved embedding post-processing."""
        model = AutoModel.from_pretrained(str(name_or_path), trust_remote_code=False)
        return cls(model, EmbeddingPostprocess.load(name_or_path), pooling)

    @property
    def encoder(self) -> nn.Module:
        return self.model

    def set_encoder_trainable(self, trainable: bool) -> None:
        """Train or freeze the encoder (frozen-encoder warm-up); the unread pooler stays frozen."""
        self.model.requires_grad_(trainable)
        freeze_unused_pooler(self.model)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None
    ) -> Tensor:
        kwargs = body_inputs(input_ids, attention_mask, token_type_ids)
        hidden = self.model(**kwargs).last_hidden_state
        pooled = (hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, attention_mask)).float()
        return pooled if self.post is None else self.post(pooled)

    def save(self, directory: Path) -> None:
        """safetensors weights + config.json (transformers' format; never pickle) + post-processing."""
        self.model.save_pretrained(str(directory), safe_serialization=True)
        if self.post is not None:
            self.post.save(directory)
