"""Optimiser and schedule set-up: AdamW parameter groups, layer-wise LR decay, warm-up/decay schedule.

Weight decay spares biases and LayerNorm; a separate head learning rate and a per-layer decay of the
encoder's learning rate (`layer_lr_decay`) are optional; the schedule is a linear warm-up to the
peak rate, then a linear decay to zero over the run's optimiser steps.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup

from simpair.training.config import TrainConfig


def param_groups(module: nn.Module, config: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases and LayerNorm; optional separate head learning rate;
    optional layer-wise learning-rate decay (`layer_lr_decay`).

    `module` holds the model as `module.model` (a `TrainModule`): parameters outside its encoder
    form the head.
    """
    encoder_ids = {id(p) for p in module.model.encoder.parameters()}
    layers = getattr(module.model.encoder.config, "num_hidden_layers", 0)
    groups: dict[tuple[bool, bool, int], list[nn.Parameter]] = {}
    for name, param in module.named_parameters():
        is_head = id(param) not in encoder_ids
        no_decay = param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name
        depth = layers if is_head else encoder_depth(name, layers)
        groups.setdefault((is_head, no_decay, depth), []).append(param)
    out = []
    for (is_head, no_decay, depth), params in groups.items():
        lr = config.head_learning_rate if (is_head and config.head_learning_rate) else config.learning_rate
        lr *= config.layer_lr_decay ** (layers - depth)
        out.append({"params": params, "lr": lr, "weight_decay": 0.0 if no_decay else config.weight_decay})
    return out


def encoder_depth(name: str, layers: int) -> int:
    """0 for embeddings, i + 1 for transformer layer i, `layers` for the rest (pooler, head).

    Why decay by depth (Howard & Ruder 2018; Sun et al. 2019): the lower layers hold general language
    features the small fine-tuning set should bend least; the top layers and head adapt most.
    """
    if "embeddings" in name:
        return 0
    match = re.search(r"\.layers?\.(\d+)\.", name)
    return min(int(match.group(1)) + 1, layers) if match else layers


def total_steps(steps_per_epoch: int, config: TrainConfig) -> int:
    """Optimiser steps of the whole run: every epoch's batches, capped by `max_steps`."""
    steps = steps_per_epoch * config.epochs
    if config.max_steps is not None:
        steps = min(steps, config.max_steps)
    return steps


def build_optimizer(
    module: nn.Module, config: TrainConfig, steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over `param_groups` and its linear warm-up (`warmup_ratio` of `steps`) then decay."""
    optimizer = torch.optim.AdamW(param_groups(module, config), lr=config.learning_rate)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * steps), max(steps, 1))
    return optimizer, scheduler
