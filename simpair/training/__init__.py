"""Training: one pydantic config -> cached tokens -> a saved model directory with metrics.

Entry point: `train(config, home) -> TrainResult(model_dir, metrics, history)`.

The names below load on first use, so that reading a config (`simpair.training.config`) does not
import the trainer's torch and transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simpair.lazy import lazy_exports

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
__getattr__ = lazy_exports(__name__, _EXPORTS)
