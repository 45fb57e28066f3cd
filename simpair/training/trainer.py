"""The training loop: `train(config, home) -> TrainResult`.

One readable path, as in Hugging Face's run_glue.py: config -> tokens from the cache -> model ->
AdamW with linear warm-up/decay and gradient clipping -> length-grouped, dynamically padded batches ->
dev evaluation each epoch -> early stopping -> best (or averaged) weights -> threshold on dev -> save.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from simpair.evaluation.binary_classification import best_threshold, binary_metrics
from simpair.evaluation.graded_similarity import graded_metrics
from simpair.losses import build_objective
from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.device import autocast, autocast_dtype, pick_device
from simpair.models.io import build_model, new_model_dir, quiet_transformers, save_model
from simpair.models.metadata import METADATA_FILE, ModelMetadata
from simpair.models.postprocess import EmbeddingPostprocess
from simpair.models.tiny import build_tiny, default_backbone
from simpair.models.tokenizer import load_tokenizer, tokenizer_fingerprint
from simpair.training import calibration as calibrate
from simpair.training.averaging import average_states
from simpair.training.config import TrainConfig
from simpair.training.data import PairTokens, collate, length_grouped_batches, load_train_data
from simpair.training.ddp import barrier, broadcast_object, init_distributed, shard_batches
from simpair.training.inference import raw_outputs, sentence_embeddings
from simpair.training.progress_slot import current_slot

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


def resolve_backbone(config: TrainConfig, home: Path) -> tuple[str, ModelMetadata | None]:
    """(name or path, parent metadata if the backbone is a simpair model directory)."""
    name = config.backbone or default_backbone()
    if name == "tiny":
        return name, None
    if name.startswith("home:"):  # newest model of a run name under <home>/models (chained nightly runs)
        prefix = name.removeprefix("home:")
        found = [p for p in (home / "models").glob(f"{prefix}-*") if (p / METADATA_FILE).is_file()]
        if not found:
            raise ValueError(f"backbone {name}: no trained model {prefix}-* under {home / 'models'}")
        name = str(max(found, key=lambda p: (p / METADATA_FILE).stat().st_mtime))
    meta_path = Path(name) / METADATA_FILE
    if meta_path.is_file():
        parent = ModelMetadata.read(Path(name))
        if parent.kind == "stacked":
            raise ValueError(f"backbone {name} is a stacked ensemble; train from one of its members")
        # A bi-encoder's weights are a plain encoder, so a cross-encoder can start from one (a new
        # head on top) and the other way round: the STS knowledge of the parent carries over.
        return name, parent
    return name, None


def dev_scores(raw: np.ndarray, kind: str) -> np.ndarray:
    """Raw outputs on the score scale used for selection (sigmoid for cross; cosine for bi)."""
    return 1 / (1 + np.exp(-raw)) if kind == "cross" else raw


def dev_metrics(raw: np.ndarray, pairs: PairTokens, config: TrainConfig) -> dict[str, float]:
    scores = dev_scores(raw, config.kind)
    if config.task == "paraphrase":
        labels = pairs.labels if (pairs.labels >= 0).all() else (pairs.targets >= 0.5).astype(np.int64)
        threshold = best_threshold(scores, labels, config.threshold_metric)
        return binary_metrics(scores, labels, threshold)
    return graded_metrics(np.clip(scores, 0, 1) if config.kind == "cross" else scores, pairs.targets)


def _param_groups(module: TrainModule, config: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases and LayerNorm; optional separate head learning rate;
    optional layer-wise learning-rate decay (`layer_lr_decay`)."""
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


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def weights_sha1(model: nn.Module) -> str:
    """Fingerprint of a module's weights (checks that DDP ranks stayed in sync)."""
    digest = hashlib.sha1()
    for key, value in sorted(model.state_dict().items()):
        digest.update(key.encode())
        digest.update(value.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _better(new: float, old: float | None) -> bool:
    return old is None or (not math.isnan(new) and new > old)


def train(config: TrainConfig, home: Path) -> TrainResult:
    """Train one model as the config says and save it under `<home>/models/` (or `output_dir`).

    With `intermediate`, a first stage is trained on the other data and its weights start this one.
    """
    threads = torch.get_num_threads()
    try:
        if config.intermediate is None:
            return _train(config, home)
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
        parent = _train(first, home)
        final = _train(config.with_overrides(intermediate=None, backbone=str(parent.model_dir)), home)
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


def _train(config: TrainConfig, home: Path) -> TrainResult:
    home = Path(home)
    device = pick_device(config.device)
    dist_info = init_distributed(device.type)
    if dist_info.enabled and device.type == "cuda":
        device = torch.device("cuda", dist_info.local_rank)
    dtype = autocast_dtype(device, config.precision)
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    seed_everything(config.seed)

    backbone, parent = resolve_backbone(config, home)
    with quiet_transformers():
        if backbone == "tiny":
            model, tokenizer = build_tiny(config.kind, seed=config.seed, cross_head=config.cross_head)
            backbone_label = "tiny-random-bert"
        else:
            tokenizer = load_tokenizer(backbone)
            model = build_model(config.kind, backbone, config.cross_head)
            backbone_label = parent.backbone if parent else backbone
    pad_id = tokenizer.pad_token_id or 0
    if isinstance(model, BiEncoder):  # a bi-encoder backbone's transform belongs to its old weights
        model.post = None

    # Rank 0 tokenizes first (file lock also protects), then the others read the cache.
    if not dist_info.is_main:
        barrier(dist_info)
    data = load_train_data(config, home, tokenizer)
    if dist_info.is_main:
        barrier(dist_info)
    train_pairs = data.train
    if config.max_train_samples is not None and config.max_train_samples < len(train_pairs):
        pick = np.random.default_rng(config.seed).permutation(len(train_pairs))[: config.max_train_samples]
        train_pairs = train_pairs.subset(np.sort(pick))
    dev_pairs = data.dev
    if config.max_dev_samples is not None and config.max_dev_samples < len(dev_pairs):
        dev_pairs = dev_pairs.subset(np.arange(config.max_dev_samples))
    trained_pairs = train_pairs
    if config.symmetric:
        train_pairs = PairTokens.concat([train_pairs, train_pairs.swapped()])

    sources = train_pairs.dataset if config.batch_per_dataset else None

    hidden = int(model.model.config.hidden_size)
    objective = build_objective(config.objective, hidden_size=hidden, **config.objective_params)
    module = TrainModule(model, objective).to(device)
    module.train()

    steps_per_epoch = len(
        shard_batches(
            length_grouped_batches(train_pairs.lengths, config.batch_size, config.seed, sources=sources),
            dist_info,
        )
    )
    total_steps = steps_per_epoch * config.epochs
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    optimizer = torch.optim.AdamW(_param_groups(module, config), lr=config.learning_rate)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), max(total_steps, 1)
    )

    def wrap(frozen: bool) -> nn.Module:
        model.encoder.requires_grad_(not frozen)
        if not dist_info.enabled:
            return module
        ids = [dist_info.local_rank] if device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)

    history: list[dict[str, Any]] = []
    best_value: float | None = None
    best_state: dict[str, torch.Tensor] | None = None
    best_epoch = 0
    recent: list[dict[str, torch.Tensor]] = []
    bad_epochs = 0
    step = 0
    metric_name = config.metric_for_selection
    started = time.perf_counter()
    train_seconds = 0.0
    samples_seen = 0
    frozen = config.freeze_encoder_epochs > 0
    runner = wrap(frozen)

    for epoch in range(1, config.epochs + 1):
        if frozen and epoch > config.freeze_encoder_epochs:
            frozen = False
            runner = wrap(frozen)
        batches = shard_batches(
            length_grouped_batches(
                train_pairs.lengths,
                config.batch_size,
                config.seed + epoch,
                config.length_grouping,
                sources=sources,
            ),
            dist_info,
        )
        epoch_start = time.perf_counter()
        epoch_samples, loss_sum, loss_n = 0, 0.0, 0
        bar = tqdm(
            batches,
            desc=f"{config.name} epoch {epoch}/{config.epochs}" + (" (encoder frozen)" if frozen else ""),
            unit="batch",
            disable=not (config.progress and dist_info.is_main),
            leave=False,
            mininterval=2.0,
            position=current_slot(),
        )
        for idx in bar:
            batch = {k: v.to(device, non_blocking=True) for k, v in collate(train_pairs, idx, pad_id).items()}
            with autocast(device, dtype):
                loss = runner(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(module.parameters(), config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            epoch_samples += len(idx) * dist_info.world_size
            loss_sum += float(loss.detach())
            loss_n += 1
            elapsed = time.perf_counter() - epoch_start
            bar.set_postfix(
                loss=f"{loss_sum / loss_n:.4f}", samples_s=f"{epoch_samples / max(elapsed, 1e-9):.1f}"
            )
            if config.max_steps is not None and step >= config.max_steps:
                break
        bar.close()
        epoch_seconds = time.perf_counter() - epoch_start
        train_seconds += epoch_seconds
        samples_seen += epoch_samples

        record: dict[str, Any] = {
            "epoch": epoch,
            "step": step,
            "train_loss": loss_sum / max(loss_n, 1),
            "train_seconds": epoch_seconds,
            "samples_per_s": epoch_samples / max(epoch_seconds, 1e-9),
            "frozen_encoder": frozen,
        }
        stop = False
        if dist_info.is_main:
            raw = raw_outputs(model, dev_pairs, pad_id, device, dtype, config.symmetric)
            record["dev"] = dev_metrics(raw, dev_pairs, config)
            value = record["dev"][metric_name]
            if _better(value, best_value):
                best_value, best_state, best_epoch, bad_epochs = value, _state(module.model), epoch, 0
            else:
                bad_epochs += 1
            if config.average_last_checkpoints > 1:
                recent = [*recent, _state(module.model)][-config.average_last_checkpoints :]
            patience = config.early_stopping_patience
            stop = patience is not None and bad_epochs >= patience
            log.info("epoch %d: loss %.4f, dev %s %.4f", epoch, record["train_loss"], metric_name, value)
            if config.progress:
                tqdm.write(
                    f"{config.name} epoch {epoch}: loss {record['train_loss']:.4f}, "
                    f"dev {metric_name} {value:.4f}, {record['samples_per_s']:.1f} samples/s"
                )
        history.append(record)
        reached_max = config.max_steps is not None and step >= config.max_steps
        stop = bool(broadcast_object(stop or reached_max, dist_info))
        if stop:
            break

    final_sha1 = weights_sha1(module.model)
    model_dir: Path | None = None
    metrics: dict[str, Any] = {}
    if dist_info.is_main:
        assert best_state is not None
        chosen = "best_epoch"
        module.model.load_state_dict(best_state)
        if len(recent) > 1:
            candidate = copy.deepcopy(module.model)
            candidate.load_state_dict(average_states(recent))
            raw = raw_outputs(candidate, dev_pairs, pad_id, device, dtype, config.symmetric)
            averaged = dev_metrics(raw, dev_pairs, config)[metric_name]
            if _better(averaged, best_value):
                module.model.load_state_dict(candidate.state_dict())
                chosen = f"average_of_last_{len(recent)}"
                best_value = averaged
        model_dir = _finish(
            config,
            home,
            module.model,
            tokenizer,
            data,
            trained_pairs,
            dev_pairs,
            parent,
            backbone if parent is not None else None,
            backbone_label,
            device,
            dtype,
            pad_id,
            history,
            {
                "best_epoch": best_epoch,
                "weights": chosen,
                "train_seconds": train_seconds,
                "wall_seconds": time.perf_counter() - started,
                "train_samples_per_s": samples_seen / max(train_seconds, 1e-9),
                "steps": step,
                "world_size": dist_info.world_size,
                "device": str(device),
                "autocast": str(dtype) if dtype else "fp32",
            },
        )
        metrics = json.loads((model_dir / "metrics.json").read_text())
    model_dir = broadcast_object(model_dir, dist_info)
    barrier(dist_info)
    return TrainResult(Path(model_dir), metrics, history, final_sha1)


def fit_postprocess(
    model: BiEncoder,
    trained: PairTokens,
    remove_directions: int,
    pad_id: int,
    device: torch.device,
    dtype: torch.dtype | None,
) -> dict[str, Any]:
    """Fit and attach the embedding transform on the distinct sentences the model was trained on."""
    distinct = {tuple(ids): None for col in ("ids_a", "ids_b") for ids in trained.cols[col]}
    model.post = None
    embeddings = sentence_embeddings(model, [list(ids) for ids in distinct], pad_id, device, dtype)
    model.post = EmbeddingPostprocess.fit(embeddings, remove_directions).to(device)
    fitted_on = sorted({f"{d}/{s}" for d, s in zip(trained.dataset, trained.split, strict=True)})
    return model.post.describe(fitted_on, len(distinct))


def _finish(
    config: TrainConfig,
    home: Path,
    model: CrossEncoder | BiEncoder,
    tokenizer: Any,
    data: Any,
    trained: PairTokens,
    dev_pairs: PairTokens,
    parent: ModelMetadata | None,
    parent_dir: str | None,
    backbone_label: str,
    device: torch.device,
    dtype: torch.dtype | None,
    pad_id: int,
    history: list[dict[str, Any]],
    run_info: dict[str, Any],
) -> Path:
    """Pick threshold/calibration on dev, write the model directory with metrics and lineage."""
    postprocess_info = None
    if config.postprocess is not None and isinstance(model, BiEncoder):
        before = dev_metrics(raw_outputs(model, dev_pairs, pad_id, device, dtype), dev_pairs, config)
        directions = config.postprocess.remove_directions
        postprocess_info = fit_postprocess(model, trained, directions, pad_id, device, dtype)
        run_info = {**run_info, "dev_before_postprocess": before}
    raw = raw_outputs(model, dev_pairs, pad_id, device, dtype, config.symmetric)
    calibration = None
    threshold = 0.5
    if config.task == "paraphrase":
        labels = dev_pairs.labels if (dev_pairs.labels >= 0).all() else (dev_pairs.targets >= 0.5).astype(int)
        if config.kind == "cross":
            probs = 1 / (1 + np.exp(-raw))
        else:  # Platt scaling of the cosine on dev gives a probability users can read
            calibration = calibrate.platt(raw, labels)
            probs = calibrate.apply(calibration, raw)
        threshold = best_threshold(probs, labels, config.threshold_metric)
        dev = binary_metrics(probs, labels, threshold)
    else:
        if config.kind == "cross":
            score = 1 / (1 + np.exp(-raw))
        else:  # monotone sigmoid fitted on dev: 0-1 scores without clipping ties
            calibration = calibrate.graded(raw, dev_pairs.targets)
            score = calibrate.apply(calibration, raw)
        dev = graded_metrics(score, dev_pairs.targets)

    out_dir = Path(config.output_dir) if config.output_dir else new_model_dir(home / "models", config.name)
    train_lines = [
        f"{d}\t{s}\t{p}" for d, s, p in zip(trained.dataset, trained.split, trained.pair_ids, strict=True)
    ]
    if parent is not None and parent.train_pairs_file and parent_dir is not None:
        parent_file = Path(parent_dir) / parent.train_pairs_file
        if parent_file.is_file():
            train_lines = parent_file.read_text().splitlines() + train_lines
    train_splits = sorted({f"{d}/{s}" for d, s in zip(trained.dataset, trained.split, strict=True)})
    if parent is not None:
        train_splits = sorted(set(train_splits) | set(parent.train_datasets))
    meta = ModelMetadata(
        kind=config.kind,
        task=config.task,
        objective=config.objective,
        threshold=threshold,
        max_length=config.max_length,
        backbone=backbone_label,
        symmetric=config.symmetric and config.kind == "cross",
        cross_head=config.cross_head,
        calibration=calibration,
        dataset_versions={**(parent.dataset_versions if parent else {}), **data.versions},
        train_datasets=train_splits,
        dev_pair_ids_file="dev_pair_ids.txt",
        train_pairs_file="train_pairs.txt",
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        init_from=parent_dir if parent is not None else None,
        embedding_postprocess=postprocess_info,
    )
    metrics = {
        "dev": dev,
        "dev_source": data.dev_source,
        "selection_metric": config.metric_for_selection,
        "train_pairs": len(trained),
        "train_pairs_by_dataset": dict(sorted(Counter(trained.dataset).items())),
        "batches_by_dataset": config.batch_per_dataset and len(set(trained.dataset)) > 1,
        "dev_pairs": len(dev_pairs),
        "excluded_leaked_train_pairs": data.excluded_leaked,
        **run_info,
        "history": history,
    }
    save_model(
        model,
        tokenizer,
        out_dir,
        meta,
        train_config_yaml=config.to_yaml(),
        metrics=metrics,
        text_files={
            "dev_pair_ids.txt": "\n".join(dev_pairs.pair_ids) + "\n",
            "train_pairs.txt": "\n".join(train_lines) + "\n",
        },
    )
    return out_dir
