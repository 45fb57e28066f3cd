"""Training: one pydantic config -> cached tokens -> a saved model directory with metrics.

Entry point: `train(config, home) -> TrainResult(model_dir, metrics, history)`.

The names below load on first use, so that reading a config (`simpair.training.config`) does not
import the trainer's torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simpair.training.config import DevConfig, SplitRef, TrainConfig
    from simpair.training.trainer import TrainResult, train

_EXPORTS = {
    "DevConfig": "simpair.training.config",
    "SplitRef": "simpair.training.config",
    "TrainConfig": "simpair.training.config",
    "TrainResult": "simpair.training.trainer",
    "train": "simpair.training.trainer",
}
__all__ = ["DevConfig", "SplitRef", "TrainConfig", "TrainResult", "train"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
