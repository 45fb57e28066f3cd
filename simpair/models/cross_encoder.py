"""Cross-encoder: both texts through one encoder together, `[CLS] a [SEP] b [SEP]` -> head -> logit.

Joint attention across the two texts is what makes cross-encoders the most accurate pair scorers
(Nogueira & Cho, 2019, "Passage Re-ranking with BERT"; the MSRP prior work in docs/). One logit per pair:
sigmoid(logit) is the paraphrase probability (binary task) or the 0-1 similarity (graded task), as in
sentence-transformers' `CrossEncoder` with `num_labels=1`. A two-label classifier (a Hugging Face
checkpoint brought as it is) is read as one logit too: softmax of class 1 is sigmoid(l1 - l0), so
`forward` returns l1 - l0 and everything downstream (sigmoid, thresholds, ONNX export) stays one-logit.

Two heads (`cross_head` in the config and in `simpair.json`):

- `cls` (default): a standard Hugging Face `AutoModelForSequenceClassification`, pooler + linear layer
  on [CLS]; the saved directory also loads in plain transformers.
- `segment_cosine`: mean-pool the jointly encoded tokens of segment a and of segment b separately and
  score `scale * cos(a, b) + bias`. Why: the bundled all-MiniLM-L6-v2 was pre-trained as a bi-encoder
  (mean pooling, cosine), so its [CLS] output carries no pair signal and a fresh [CLS] head starts
  from nothing (STS-B cross-encoder test 0.832, below the bi-encoder's 0.861). Pooling each segment
  reuses the pre-trained similarity: untrained, this head already ranks STS-B dev pairs at Spearman
  0.77, while the tokens of each text can still attend to the other's. The body is a plain
  `AutoModel`; `scale` and `bias` are saved beside it in `cross_head.safetensors`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from transformers import AutoModel, AutoModelForSequenceClassification, PreTrainedModel
from transformers.utils import logging as hf_logging

from simpair.models.body import body_inputs
from simpair.models.pooler import freeze_unused_pooler

CrossHead = Literal["cls", "segment_cosine"]
CROSS_HEADS: tuple[str, ...] = ("cls", "segment_cosine")
HEAD_FILE = "cross_head.safetensors"
# Untrained cosines of related sentences sit high (about 0.7-1.0): this maps 0.85 to logit 0 and
# spreads the band over a few logits. Training moves both (give them a head learning rate).
INIT_SCALE, INIT_BIAS = 10.0, -8.5
log = logging.getLogger(__name__)


def checkpoint_labels(name_or_path: str | Path) -> int:
    """How many logits a saved sequence classifier's head has (1 for anything that is not one).

    A body without a classifier (a sentence encoder used as a backbone) gets a fresh one-logit head;
    a classifier keeps its head: 1 logit, or 2 (read as one, `one_logit`). More labels (NLI's three)
    are not a pair score, and are refused here, before any weight is read.
    """
    import json

    config_file = Path(name_or_path) / "config.json"
    if not config_file.is_file():
        return 1
    config = json.loads(config_file.read_text(encoding="utf-8"))
    if not any(str(a).endswith("ForSequenceClassification") for a in config.get("architectures") or []):
        return 1
    labels = len(config.get("id2label") or {}) or int(config.get("num_labels", 2))
    if labels > 2:
        names = ", ".join(map(str, (config.get("id2label") or {}).values()))
        raise ValueError(
            f"{name_or_path}: a classifier with {labels} labels ({names}); "
            "simpair scores a pair with one probability, from a head of 1 logit (sigmoid) or 2 (softmax)"
        )
    return labels


def one_logit(logits: torch.Tensor) -> torch.Tensor:
    """(B, 1) -> (B,); a two-label head (B, 2) -> l1 - l0, whose sigmoid is softmax's class 1."""
    if logits.shape[-1] == 2:
        return logits[..., 1] - logits[..., 0]
    return logits.squeeze(-1)


def _classifier_from_pretrained(name_or_path: str | Path) -> PreTrainedModel:
    """A sequence classifier with one logit (or a saved two-label head); a head the checkpoint lacks is
    logged as one plain line.

    transformers would print its multi-line, colour-coded load report for the fresh head, which every
    cross-encoder built from a sentence encoder has; under a worker or cron that reads as an error.
    Anything else missing, unexpected or resized is still a warning.
    """
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            str(name_or_path),
            num_labels=checkpoint_labels(name_or_path),
            trust_remote_code=False,
            output_loading_info=True,
        )
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys") or [])
    fresh = [k for k in missing if k.split(".")[0] in ("classifier", "score", "pooler")]
    if fresh:
        log.info("%s: new classification head (%s), trained from scratch", name_or_path, ", ".join(fresh))
    others = {
        "missing": [k for k in missing if k not in fresh],
        "unexpected": sorted(info.get("unexpected_keys") or []),
        "mismatched": sorted(str(k) for k in info.get("mismatched_keys") or []),
    }
    for what, keys in others.items():
        if keys:
            log.warning(
                "%s: %d %s weight(s) when loading: %s", name_or_path, len(keys), what, ", ".join(keys[:8])
            )
    return model


def segment_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token vectors where `mask` (B, T) is true."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


class SegmentCosineHead(nn.Module):
    """logit = scale * cos(mean of segment-a tokens, mean of segment-b tokens) + bias."""

    def __init__(self, scale: float = INIT_SCALE, bias: float = INIT_BIAS) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(float(scale)))
        self.bias = nn.Parameter(torch.tensor(float(bias)))

    def forward(
        self, hidden: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        real = attention_mask.bool()
        a = segment_mean(hidden, real & (token_type_ids == 0))
        b = segment_mean(hidden, real & (token_type_ids == 1))
        cosine = nn.functional.cosine_similarity(a.float(), b.float(), dim=-1)
        return self.scale * cosine + self.bias

    def save(self, directory: Path) -> Path:
        path = Path(directory) / HEAD_FILE
        tensors = {"scale": self.scale, "bias": self.bias}
        save_file({k: v.detach().cpu().reshape(1) for k, v in tensors.items()}, path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> SegmentCosineHead:
        """The head saved in a model directory, or a fresh one (a backbone or a `cls` cross-encoder)."""
        path = Path(directory) / HEAD_FILE
        if not path.is_file():
            return cls()
        tensors = load_file(str(path))
        return cls(float(tensors["scale"][0]), float(tensors["bias"][0]))


class CrossEncoder(nn.Module):
    """A transformer with a one-logit pair head; `forward` returns logits of shape (B,)."""

    kind = "cross"

    def __init__(self, model: PreTrainedModel, pair_head: SegmentCosineHead | None = None) -> None:
        super().__init__()
        self.model = model
        self.pair_head = pair_head
        if pair_head is not None:  # the segment-cosine head never reads the body's pooler
            freeze_unused_pooler(model)

    @property
    def head(self) -> CrossHead:
        return "cls" if self.pair_head is None else "segment_cosine"

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, head: CrossHead = "cls") -> CrossEncoder:
        """Load any local directory or hub id (never remote code); a missing head is freshly initialised."""
        if head == "segment_cosine":
            body = AutoModel.from_pretrained(str(name_or_path), trust_remote_code=False)
            return cls(body, SegmentCosineHead.load(name_or_path))
        if head != "cls":
            raise ValueError(f"cross_head must be one of {CROSS_HEADS}, got {head!r}")
        return cls(_classifier_from_pretrained(name_or_path))

    @property
    def encoder(self) -> nn.Module:
        """The transformer body (for frozen-encoder warm-up): everything but the pair head."""
        if self.pair_head is not None:
            return self.model
        return getattr(self.model, self.model.base_model_prefix)

    def set_encoder_trainable(self, trainable: bool) -> None:
        """Train or freeze the encoder (frozen-encoder warm-up); an unread pooler stays frozen."""
        self.encoder.requires_grad_(trainable)
        if self.pair_head is not None:
            freeze_unused_pooler(self.model)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None
    ) -> Tensor:
        kwargs = body_inputs(input_ids, attention_mask, token_type_ids)
        if self.pair_head is None:
            return one_logit(self.model(**kwargs).logits).float()
        if token_type_ids is None:
            raise ValueError(
                "cross_head segment_cosine needs token_type_ids to find the two texts "
                "(a BERT-style tokenizer); use cross_head: cls for this backbone"
            )
        hidden = self.model(**kwargs).last_hidden_state
        return self.pair_head(hidden, attention_mask, token_type_ids).float()

    def save(self, directory: Path) -> None:
        """safetensors weights + config.json (transformers' format; never pickle) + the pair head."""
        self.model.save_pretrained(str(directory), safe_serialization=True)
        if self.pair_head is not None:
            self.pair_head.save(directory)
