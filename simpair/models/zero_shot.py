"""The pre-trained backbone, untouched, saved as a bi-encoder model folder (mean pooling, cosine).

Two places need "what the backbone does with no training at all": the promotion gate's first bar
(`simpair.evaluation.zero_shot_baseline`, which also picks its paraphrase threshold) and a stack's
zero-shot member (`simpair.ensemble.backbone_member`). Both save it here, the same way. Tests and the
smoke profile name a tiny random backbone, built from `seed` as the tiny models they compare with.
"""

from __future__ import annotations

from pathlib import Path

from simpair.models.io import build_model, save_model
from simpair.models.metadata import ModelMetadata
from simpair.models.tiny import TINY_BACKBONE, build_tiny
from simpair.models.tokenizer import load_tokenizer

ZERO_SHOT_OBJECTIVE = "zero-shot"
# backbone names that mean the tiny random BERT of the tests and the smoke profile
TINY_NAMES = frozenset({"tiny", TINY_BACKBONE})


def save_zero_shot(backbone: str, task: str, directory: Path, max_length: int = 128, seed: int = 0) -> Path:
    """The backbone as a bi-encoder, saved as a model directory (threshold 0.5 until one is chosen)."""
    if backbone in TINY_NAMES:
        model, tokenizer = build_tiny("bi", seed=seed)
        backbone = TINY_BACKBONE
    else:
        model, tokenizer = build_model("bi", backbone), load_tokenizer(backbone)
    meta = ModelMetadata(
        kind="bi",
        task=task,  # type: ignore[arg-type]
        objective=ZERO_SHOT_OBJECTIVE,
        threshold=0.5,
        max_length=max_length,
        backbone=backbone,
    )
    return save_model(model, tokenizer, Path(directory), meta)
