"""What one training stage starts from: the backbone to train, and the train and dev tokens it reads.

`train_once` (`simpair.training.loop`) calls `load_backbone`, then `load_pairs`, in that order (both
draw from the seeded random state), before it builds the objective and runs its epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.io import build_model, quiet_transformers
from simpair.models.metadata import ModelMetadata
from simpair.models.tiny import build_tiny
from simpair.models.tokenizer import load_tokenizer
from simpair.pair_tokens import PairTokens
from simpair.training.backbone import resolve_backbone
from simpair.training.config import TrainConfig
from simpair.training.data import TrainData, load_train_data
from simpair.training.ddp import DistInfo, barrier, gather_objects, shard_rows


@dataclass(frozen=True)
class Backbone:
    """The model to train and its tokenizer, and the earlier stage it starts from, if any."""

    model: CrossEncoder | BiEncoder
    tokenizer: Any
    label: str  # the backbone recorded in simpair.json
    parent: ModelMetadata | None
    parent_dir: str | None
    pad_id: int


def load_backbone(config: TrainConfig, home: Path) -> Backbone:
    """The backbone (or the tiny random model, or an earlier stage's weights) as the config names it."""
    backbone, parent = resolve_backbone(config, home)
    with quiet_transformers():
        if backbone == "tiny":
            model, tokenizer = build_tiny(config.kind, seed=config.seed, cross_head=config.cross_head)
            label = "tiny-random-bert"
        else:
            tokenizer = load_tokenizer(backbone)
            model = build_model(config.kind, backbone, config.cross_head)
            label = parent.backbone if parent else backbone
    if isinstance(model, BiEncoder):  # a bi-encoder backbone's transform belongs to its old weights
        model.post = None
    parent_dir = backbone if parent is not None else None
    return Backbone(model, tokenizer, label, parent, parent_dir, tokenizer.pad_token_id or 0)


@dataclass(frozen=True)
class Pairs:
    """The tokens a stage reads: `train` is this rank's batches' source, `trained` every training pair."""

    data: TrainData
    train: PairTokens
    trained: PairTokens
    dev: PairTokens
    shards: dict[str, Any]


def load_pairs(config: TrainConfig, home: Path, tokenizer: Any, dist_info: DistInfo) -> Pairs:
    """Train and dev tokens, cut to the config's sample limits; under DDP this rank's own shard."""
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
    shards: dict[str, Any] = {}
    if dist_info.enabled:  # each rank reads only its own disjoint shard
        train_pairs = train_pairs.subset(shard_rows(len(train_pairs), config.seed, dist_info))
        shard = {"pairs": len(train_pairs), "sha1": train_pairs.digest()}
        shards = {"ddp_shards": gather_objects(shard, dist_info)}
    if config.symmetric:
        train_pairs = PairTokens.concat([train_pairs, train_pairs.swapped()])
    return Pairs(data, train_pairs, trained_pairs, dev_pairs, shards)
