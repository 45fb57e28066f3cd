"""Training: one pydantic config -> cached tokens -> a saved model directory with metrics.

Entry point: `train(config, home) -> TrainResult(model_dir, metrics, history)`.
"""

from simpair.training.config import DevConfig, SplitRef, TrainConfig
from simpair.training.trainer import TrainResult, train

__all__ = ["DevConfig", "SplitRef", "TrainConfig", "TrainResult", "train"]
