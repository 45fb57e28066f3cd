"""Cross-encoder: both texts through one encoder together, `[CLS] a [SEP] b [SEP]` -> head -> logit.

Joint attention across the two texts is what makes cross-encoders the most accurate pair scorers
(Nogueira & Cho, 2019, "Passage Re-ranking with BERT"; the MSRP prior work in docs/). One logit per pair:
sigmoid(logit) is the paraphrase probability (binary task) or the 0-1 similarity (graded task), as in
sentence-transformers' `CrossEncoder` with `num_labels=1`. The weights are a standard Hugging Face
`AutoModelForSequenceClassification`, so the saved directory also loads in plain transformers.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForSequenceClassification, PreTrainedModel


class CrossEncoder(nn.Module):
    """A sequence-classification transformer with one output; `forward` returns logits of shape (B,)."""

    kind = "cross"

    def __init__(self, model: PreTrainedModel) -> None:
        super().__init__()
        self.model = model

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> CrossEncoder:
        """Load any local directory or hub id (never remote code); a missing head is freshly initialised."""
        model = AutoModelForSequenceClassification.from_pretrained(
            str(name_or_path), num_labels=1, trust_remote_code=False
        )
        return cls(model)

    @property
    def encoder(self) -> nn.Module:
        """The transformer body (for frozen-encoder warm-up): everything but the classification head."""
        return getattr(self.model, self.model.base_model_prefix)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        return self.model(**kwargs).logits.squeeze(-1).float()

    def save(self, directory: Path) -> None:
        """safetensors weights + config.json (transformers' format; never pickle)."""
        self.model.save_pretrained(str(directory), safe_serialization=True)
