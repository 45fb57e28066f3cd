"""The pre-trained backbone, untouched, as one more stack member.

Fine-tuning on a few thousand STS-B pairs makes a model better on STS-B and forgets some of what the
backbone learnt from its billion pre-training pairs; the untouched backbone's cosine keeps that
knowledge, so it makes different mistakes from the fine-tuned members and the stack can use it
(the same reason WiSE-FT and model soups mix pre-trained and fine-tuned weights). Measured on STS-B
dev (out-of-fold): soup + cross-encoder 0.8975, + zero-shot backbone 0.9000 (docs/experiments.md).

It has no dev split and no training pairs of its own: it is tuned on nothing, so it can join any
stack of members built on its backbone without leaking anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simpair.models.metadata import ModelMetadata
from simpair.models.zero_shot import ZERO_SHOT_OBJECTIVE, save_zero_shot


def is_zero_shot(meta: ModelMetadata) -> bool:
    return meta.objective == ZERO_SHOT_OBJECTIVE


def zero_shot_members(metas: Sequence[ModelMetadata], workdir: Path) -> list[Path]:
    """One zero-shot member per distinct backbone of the trained members, saved under `workdir`."""
    backbones = list(dict.fromkeys(m.backbone for m in metas if not is_zero_shot(m)))
    task = metas[0].task
    max_length = max(m.max_length for m in metas)
    return [save_zero_shot(b, task, workdir / f"zero-shot-{i}", max_length) for i, b in enumerate(backbones)]
