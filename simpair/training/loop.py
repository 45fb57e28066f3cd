"""The training loop: one training stage from config to saved model, `train_once(config, home)`.

One readable path, as in Hugging Face's run_glue.py: config -> tokens from the cache -> model ->
optimiser and schedule (`optim`) -> length-grouped, dynamically padded batches -> dev evaluation each
epoch -> early stopping -> best (or averaged) weights (`checkpoint`) -> threshold on dev -> save
(`finish`). Under torchrun every rank runs it on its own shard of the training pairs; rank 0
evaluates and saves.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from simpair.losses import build_objective
from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.device import autocast, pick_device, training_dtype
from simpair.models.inference import raw_outputs
from simpair.progress import note, progress
from simpair.training.checkpoint import BestWeights, dev_metrics, weights_sha1
from simpair.training.config import TrainConfig
from simpair.training.data import collate
from simpair.training.ddp import (
    DistInfo,
    agree_min,
    barrier,
    broadcast_object,
    init_distributed,
)
from simpair.training.finish import TrainedRun, finish
from simpair.training.inputs import Backbone, Pairs, load_backbone, load_pairs
from simpair.training.optim import build_optimizer, total_steps
from simpair.training.progress_slot import current_slot
from simpair.training.sampling import epoch_batches, epoch_rows
from simpair.training.starting_weights import StartingWeights

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    model_dir: Path
    metrics: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    # sha1 of the weights at the end of the training loop on this process: equal on every DDP rank.
    final_weights_sha1: str = ""


class TrainModule(nn.Module):
    """Model + objective in one module, so DDP sees one forward per step (bi-encoders encode twice)."""

    def __init__(self, model: CrossEncoder | BiEncoder, objective: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.objective = objective

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        targets = batch["targets"]
        if isinstance(self.model, CrossEncoder):
            logits = self.model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
            return self.objective(logits, targets)
        u = self.model(batch["a_input_ids"], batch["a_attention_mask"])
        v = self.model(batch["b_input_ids"], batch["b_attention_mask"])
        return self.objective((u, v), targets)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


@dataclass
class _Stage:
    """What one training stage has set up before its first batch, shared by the steps below."""

    config: TrainConfig
    home: Path
    device: torch.device
    dtype: torch.dtype | None
    dist_info: DistInfo
    base: Backbone
    pairs: Pairs
    module: TrainModule
    optimizer: torch.optim.Optimizer
    scheduler: Any
    start: StartingWeights
    plan: Callable[..., list[np.ndarray]]
    # Dev metrics, the threshold, the calibration and the post-processing fit are computed in fp32,
    # the precision every prediction runs in by default: bf16 autocast is for the training steps only.
    eval_dtype: torch.dtype | None = None


@dataclass
class _Clock:
    """Steps, time and samples summed over the epochs, for the run's report."""

    started: float = field(default_factory=time.perf_counter)
    step: int = 0
    train_seconds: float = 0.0
    samples_seen: int = 0


def _prepare_stage(config: TrainConfig, home: Path) -> _Stage:
    """Device, process group, seed, backbone, tokens, objective, optimiser: everything before epoch 1."""
    device = pick_device(config.device)
    dist_info = init_distributed(device.type)
    if dist_info.enabled and device.type == "cuda":
        device = torch.device("cuda", dist_info.local_rank)
    dtype = training_dtype(device, config.precision)
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    seed_everything(config.seed)

    base = load_backbone(config, home)
    pairs = load_pairs(config, home, base.tokenizer, dist_info)
    train_pairs = pairs.train
    sources = train_pairs.dataset_codes() if config.batch_per_dataset else None
    per_rank = config.samples_per_epoch
    if per_rank is not None:
        per_rank = -(-per_rank // dist_info.world_size)

    def plan(epoch: int, seed: int, group: bool = True) -> list[np.ndarray]:
        """This rank's batches for an epoch, cut to the count every rank can run."""
        rows = epoch_rows(len(train_pairs), per_rank, epoch, config.seed)
        batches = epoch_batches(train_pairs.lengths, config.batch_size, seed, group, sources, rows)
        return batches[: agree_min(len(batches), dist_info)]

    hidden = int(base.model.model.config.hidden_size)
    objective = build_objective(config.objective, hidden_size=hidden, **config.objective_params)
    module = TrainModule(base.model, objective).to(device)
    module.train()

    steps_per_epoch = len(plan(1, config.seed))
    optimizer, scheduler = build_optimizer(module, config, total_steps(steps_per_epoch, config))
    start = StartingWeights(base.model.model)
    return _Stage(
        config, home, device, dtype, dist_info, base, pairs, module, optimizer, scheduler, start, plan
    )


def _runner(stage: _Stage, frozen: bool) -> nn.Module:
    """The module the steps call: the encoder frozen or not, wrapped in DDP under torchrun."""
    stage.base.model.set_encoder_trainable(not frozen)
    if not stage.dist_info.enabled:
        return stage.module
    ids = [stage.dist_info.local_rank] if stage.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(stage.module, device_ids=ids)


def _train_epoch(stage: _Stage, runner: nn.Module, epoch: int, frozen: bool, clock: _Clock) -> dict[str, Any]:
    """One epoch of optimiser steps on this rank's batches (stopping at `max_steps`), counted on `clock`.

    Returns the epoch's record, without dev metrics yet.
    """
    config, dist_info, device = stage.config, stage.dist_info, stage.device
    batches = stage.plan(epoch, config.seed + epoch, config.length_grouping)
    epoch_start = time.perf_counter()
    epoch_samples, loss_sum, loss_n = 0, 0.0, 0
    bar = progress(
        batches,
        desc=f"{config.name} epoch {epoch}/{config.epochs}" + (" (encoder frozen)" if frozen else ""),
        unit="batch",
        disable=not (config.progress and dist_info.is_main),
        leave=False,
        mininterval=2.0,
        position=current_slot(),
    )
    for idx in bar:
        batch = {
            k: v.to(device, non_blocking=True)
            for k, v in collate(stage.pairs.train, idx, stage.base.pad_id).items()
        }
        with autocast(device, stage.dtype):
            loss = runner(batch)
        stage.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.l2sp:
            stage.start.pull(config.l2sp)
        if config.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(stage.module.parameters(), config.max_grad_norm)
        stage.optimizer.step()
        stage.scheduler.step()
        clock.step += 1
        epoch_samples += len(idx) * dist_info.world_size
        loss_sum += float(loss.detach())
        loss_n += 1
        elapsed = time.perf_counter() - epoch_start
        bar.set_postfix(
            loss=f"{loss_sum / loss_n:.4f}", samples_s=f"{epoch_samples / max(elapsed, 1e-9):.1f}"
        )
        if config.max_steps is not None and clock.step >= config.max_steps:
            break
    bar.close()
    epoch_seconds = time.perf_counter() - epoch_start
    clock.train_seconds += epoch_seconds
    clock.samples_seen += epoch_samples
    return {
        "epoch": epoch,
        "step": clock.step,
        "train_loss": loss_sum / max(loss_n, 1),
        "train_seconds": epoch_seconds,
        "samples_per_s": epoch_samples / max(epoch_seconds, 1e-9),
        "frozen_encoder": frozen,
        "encoder_moved": stage.start.distance(),
    }


def _dev_metrics(stage: _Stage, model: nn.Module) -> dict[str, float]:
    """`model`'s metrics on the dev pairs, in fp32."""
    config, dev = stage.config, stage.pairs.dev
    raw = raw_outputs(model, dev, stage.base.pad_id, stage.device, stage.eval_dtype, config.symmetric)
    return dev_metrics(raw, dev, config)


def _score_dev_epoch(stage: _Stage, record: dict[str, Any], kept: BestWeights) -> bool:
    """Rank 0 only: add the dev metrics to the epoch's record, keep the weights, say whether to stop."""
    config, epoch = stage.config, record["epoch"]
    metric_name = config.metric_for_selection
    record["dev"] = _dev_metrics(stage, stage.base.model)
    value = record["dev"][metric_name]
    kept.observe(epoch, value, stage.module.model)
    stop = kept.should_stop(config.early_stopping_patience)
    log.info("epoch %d: loss %.4f, dev %s %.4f", epoch, record["train_loss"], metric_name, value)
    if config.progress:
        note(
            f"{config.name} epoch {epoch}: loss {record['train_loss']:.4f}, "
            f"dev {metric_name} {value:.4f}, {record['samples_per_s']:.1f} samples/s"
        )
    return stop


def _save_chosen_weights(
    stage: _Stage, kept: BestWeights, history: list[dict[str, Any]], clock: _Clock
) -> Path:
    """Rank 0 only: pick the best (or averaged) weights, apply WiSE-FT if asked, and save the model."""
    config, module = stage.config, stage.module
    metric_name = config.metric_for_selection

    def selection_value(candidate: nn.Module) -> float:
        return _dev_metrics(stage, candidate)[metric_name]

    chosen = kept.choose(module.model, selection_value)
    wise: dict[str, Any] = {}
    if config.wise_ft_alpha is not None:
        before = selection_value(module.model)
        stage.start.interpolate(config.wise_ft_alpha)
        wise = {"wise_ft": {"alpha": config.wise_ft_alpha, f"dev_{metric_name}_before": before}}
    train_seconds = clock.train_seconds
    run_info = {
        "best_epoch": kept.epoch,
        "weights": chosen,
        "train_seconds": train_seconds,
        "wall_seconds": time.perf_counter() - clock.started,
        "train_samples_per_s": clock.samples_seen / max(train_seconds, 1e-9),
        "steps": clock.step,
        "world_size": stage.dist_info.world_size,
        "device": str(stage.device),
        "autocast": str(stage.dtype) if stage.dtype else "fp32",
        "encoder_moved": stage.start.distance(),
        **({"samples_per_epoch": config.samples_per_epoch} if config.samples_per_epoch else {}),
        **stage.pairs.shards,
        **wise,
    }
    base, pairs = stage.base, stage.pairs
    return finish(
        TrainedRun(
            config=config, home=stage.home, model=module.model, tokenizer=base.tokenizer, data=pairs.data,
            trained=pairs.trained, dev_pairs=pairs.dev, parent=base.parent, parent_dir=base.parent_dir,
            backbone_label=base.label, device=stage.device, dtype=stage.eval_dtype, pad_id=base.pad_id,
            history=history, run_info=run_info,
        )
    )  # fmt: skip


def train_once(config: TrainConfig, home: Path) -> TrainResult:
    """Train one stage as the config says (no intermediate stage) and save it."""
    home = Path(home)
    stage = _prepare_stage(config, home)
    dist_info = stage.dist_info
    history: list[dict[str, Any]] = []
    kept = BestWeights(config.average_last_checkpoints)
    clock = _Clock()
    frozen = config.freeze_encoder_epochs > 0
    runner = _runner(stage, frozen)

    for epoch in range(1, config.epochs + 1):
        if frozen and epoch > config.freeze_encoder_epochs:
            frozen = False
            runner = _runner(stage, frozen)
        record = _train_epoch(stage, runner, epoch, frozen, clock)
        stop = _score_dev_epoch(stage, record, kept) if dist_info.is_main else False
        history.append(record)
        reached_max = config.max_steps is not None and clock.step >= config.max_steps
        stop = bool(broadcast_object(stop or reached_max, dist_info))
        if stop:
            break

    final_sha1 = weights_sha1(stage.module.model)
    model_dir: Path | None = None
    metrics: dict[str, Any] = {}
    if dist_info.is_main:
        model_dir = _save_chosen_weights(stage, kept, history, clock)
        metrics = json.loads((model_dir / "metrics.json").read_text())
    model_dir = broadcast_object(model_dir, dist_info)
    barrier(dist_info)
    return TrainResult(Path(model_dir), metrics, history, final_sha1)
