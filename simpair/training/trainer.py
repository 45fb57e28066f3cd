"""Train one model as a config says: `train(config, home) -> TrainResult`, the training entry point.

With `intermediate`, a first stage is trained on the other data and its weights start the final
stage; each stage is one run of the training loop (`simpair.training.loop`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from simpair.training.config import TrainConfig
from simpair.training.loop import TrainResult, train_once

__all__ = ["TrainResult", "train"]


def train(config: TrainConfig, home: Path) -> TrainResult:
    """Train one model as the config says and save it under `<home>/models/` (or `output_dir`).

    With `intermediate`, a first stage is trained on the other data and its weights start this one.
    """
    threads = torch.get_num_threads()
    try:
        if config.intermediate is None:
            return train_once(config, home)
        stage = config.intermediate
        first = config.with_overrides(
            name=f"{config.name}-intermediate",
            task=stage.task,
            objective=stage.objective or config.objective,
            train=stage.train,
            dev=stage.dev,
            epochs=stage.epochs,
            learning_rate=stage.learning_rate,
            intermediate=None,
            output_dir=None,
            max_steps=config.max_steps,
        )
        started = time.perf_counter()
        parent = train_once(first, home)
        final = train_once(config.with_overrides(intermediate=None, backbone=str(parent.model_dir)), home)
        final.metrics["intermediate"] = {
            "model_dir": str(parent.model_dir),
            "dev": parent.metrics.get("dev", {}),
            "wall_seconds": parent.metrics.get("wall_seconds"),
        }
        final.metrics["wall_seconds_total"] = time.perf_counter() - started
        if not final.metrics.get("dev"):  # DDP ranks other than 0 have nothing to write
            return final
        (final.model_dir / "metrics.json").write_text(
            json.dumps(final.metrics, indent=2, sort_keys=True) + "\n"
        )
        (final.model_dir / "train_config.yaml").write_text(config.to_yaml())
        return final
    finally:
        torch.set_num_threads(threads)
