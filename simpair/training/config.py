"""The one validated object that describes a training run (`configs/<name>.yaml`).

Printable and logged whole (MLflow, `train_config.yaml` beside the model), so a run can be repeated
from its model directory alone. Unknown keys are errors: a typo in a nightly config must fail loudly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from simpair.losses import get_objective_class


class SplitRef(BaseModel):
    """One split of one ingested dataset (version: the catalog's current one unless pinned)."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    split: str
    version: str | None = None
    # Pairs whose id matches this regular expression are left out, e.g. a genre held out of training to
    # measure transfer to it (STS-B ids start with the source file: "^(MSRpar|headlines|deft-news)-").
    exclude_pair_ids: str | None = None
    # Train splits: each pair counted this many times per epoch, for a few labelled pairs of the domain that
    # matters among many others (the reviewed traffic pairs, `simpair.training.reviews`).
    repeat: int = Field(1, ge=1, le=100)

    @field_validator("exclude_pair_ids")
    @classmethod
    def _valid_pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
        return value

    def label(self) -> str:
        return f"{self.dataset}/{self.split}"


class DevConfig(BaseModel):
    """Dev data: an existing split, or (when `split` is null) a stratified carve from the first train split.

    MSRP has no dev split, so its dev set is carved from train with a fixed seed, stratified on the
    label, and its pair ids are written with the model so no one ever trains on them by accident.
    """

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = None
    split: str | None = None
    exclude_pair_ids: str | None = None  # as SplitRef's: a held-out genre must not steer early stopping
    carve_fraction: float = Field(0.1, gt=0, lt=1)
    carve_seed: int = 13


class IntermediateConfig(BaseModel):
    """An optional first stage on other data whose weights start the main stage (STILTs).

    Phang et al. (2018), "Sentence Encoders on STILTs": supplementary training on a related labelled
    task before the target task helps small target sets such as MRPC. The stage is protected by the
    main run's `evaluate_on` splits too, so no evaluation pair is ever trained on.
    """

    model_config = ConfigDict(extra="forbid")

    task: Literal["paraphrase", "sts"]
    train: list[SplitRef]
    dev: DevConfig = Field(default_factory=DevConfig)
    epochs: int = Field(1, ge=1)
    learning_rate: float = Field(1e-4, gt=0)
    objective: str | None = None  # default: the main stage's objective


class PostprocessConfig(BaseModel):
    """Bi-encoders: centre the embeddings and remove their top principal directions after training.

    Fitted on the model's own training sentences (no labels); simpair.models.embedding_postprocess
    says why.
    """

    model_config = ConfigDict(extra="forbid")

    remove_directions: int = Field(1, ge=0, le=64)  # 0: centring only


class TrainConfig(BaseModel):
    """Everything a training run needs; see docs/training.md for each field's meaning and defaults."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    task: Literal["paraphrase", "sts"]
    kind: Literal["cross", "bi"]
    objective: str
    objective_params: dict[str, Any] = Field(default_factory=dict)
    backbone: str | None = None  # local dir, hub id, simpair model dir, or "tiny" (tests); None = bundled
    train: list[SplitRef]
    dev: DevConfig = Field(default_factory=DevConfig)
    # Splits this model will be evaluated on: training drops any train pair the leakage report finds there.
    evaluate_on: list[SplitRef] = Field(default_factory=list)
    max_length: int = Field(128, ge=8, le=4096)
    intermediate: IntermediateConfig | None = None

    epochs: int = Field(3, ge=1)
    batch_size: int = Field(16, ge=2)
    learning_rate: float = Field(2e-5, gt=0)
    head_learning_rate: float | None = None
    # < 1: encoder layer i of L (1 = lowest) trains at learning_rate * decay ** (L - i), embeddings at
    # decay ** L, the top layer and any head at the full rate
    layer_lr_decay: float = Field(1.0, gt=0, le=1)
    weight_decay: float = 0.01
    # > 0: L2-SP (Li et al. 2018), a pull of strength alpha toward the encoder's starting weights
    # (simpair.training.starting_weights); weight decay still applies as set
    l2sp: float = Field(0.0, ge=0)
    # set: WiSE-FT (Wortsman et al. 2022), the saved encoder is start + alpha * (fine-tuned - start),
    # applied to the dev-chosen weights before threshold/calibration are fitted on dev
    wise_ft_alpha: float | None = Field(None, ge=0, le=1)
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    max_grad_norm: float | None = 1.0
    freeze_encoder_epochs: int = Field(0, ge=0)
    # cross-encoders: "cls" head, or "segment_cosine" (cosine of the two texts' jointly encoded tokens)
    cross_head: Literal["cls", "segment_cosine"] = "cls"
    symmetric: bool = False  # train on (a, b) and (b, a); cross-encoders then average both at prediction
    length_grouping: bool = True
    # several train datasets: each batch from one dataset only (in-batch losses compare labels on one scale)
    batch_per_dataset: bool = True
    early_stopping_patience: int | None = 2
    selection_metric: str | None = None  # paraphrase: accuracy; sts: spearman
    threshold_metric: Literal["accuracy", "f1"] = "accuracy"
    average_last_checkpoints: int = Field(1, ge=1)  # >1: average the weights of the last k epochs
    postprocess: PostprocessConfig | None = None  # bi-encoders: centre embeddings, remove top directions
    seed: int = 42
    max_steps: int | None = None  # stop after this many optimiser steps (smoke runs, bounded nights)
    # set: each epoch trains on this many rows (swapped copies of symmetric training included), drawn
    # by walking a seeded permutation of all rows that continues across epochs: bounded time per
    # epoch on a large set, and every pair seen across epochs (simpair.training.sampling)
    samples_per_epoch: int | None = Field(None, ge=1)
    max_train_samples: int | None = None  # use only the first N train pairs after shuffling (smoke)
    max_dev_samples: int | None = None
    device: str = "auto"
    precision: Literal["auto", "fp32", "bf16"] = (
        "auto"  # auto: bf16 autocast where native (device.training_dtype)
    )
    num_threads: int | None = None
    progress: bool = True
    output_dir: str | None = None  # default: <home>/models/<name>-<UTC timestamp>

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        cls = get_objective_class(self.objective)
        if cls.kind != self.kind:  # type: ignore[attr-defined]
            raise ValueError(
                f"objective {self.objective!r} trains {cls.kind}-encoders but kind is {self.kind!r}"  # type: ignore[attr-defined]
            )
        if not self.train:
            raise ValueError("train: at least one split is needed")
        if self.cross_head != "cls" and self.kind != "cross":
            raise ValueError(f"cross_head {self.cross_head!r} is for cross-encoders; this config trains bi")
        if self.postprocess is not None and self.kind != "bi":
            raise ValueError("postprocess is for bi-encoder embeddings; this config trains a cross-encoder")
        return self

    @property
    def metric_for_selection(self) -> str:
        return self.selection_metric or ("accuracy" if self.task == "paraphrase" else "spearman")

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainConfig:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {exc}") from exc
        try:
            return cls.model_validate(data)
        except Exception as exc:
            raise ValueError(f"{path}: invalid training config: {exc}") from exc

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    def with_overrides(self, **changes: Any) -> TrainConfig:
        """A validated copy with some fields changed (CLI `--set key=value`, tests, benchmarks)."""
        return type(self).model_validate({**self.model_dump(), **changes})


def parse_overrides(values: list[str] | None) -> dict[str, Any]:
    """`key=value` pairs (the command line's `--set`) as config changes; values parse as YAML
    (numbers, booleans, lists). ValueError for an item without `=`."""
    out: dict[str, Any] = {}
    for item in values or []:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    return out


def load_train_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """A training config file with field overrides applied (ValueError naming what is wrong)."""
    config = TrainConfig.from_yaml(path)
    return config.with_overrides(**overrides) if overrides else config


def parse_split(value: str) -> tuple[str, str]:
    """`DATASET/SPLIT` (e.g. `msrp/test`) as (dataset, split); ValueError otherwise."""
    if "/" not in value:
        raise ValueError(f"expected DATASET/SPLIT (e.g. msrp/test), got {value!r}")
    dataset, split = value.split("/", 1)
    return dataset, split


def train_seed(model_dir: Path) -> int:
    """Seed the model was initialised with (tiny backbones: the zero-shot twin uses the same init)."""
    path = model_dir / "train_config.yaml"
    if path.is_file():
        seed = (yaml.safe_load(path.read_text()) or {}).get("seed")
        if isinstance(seed, int):
            return seed
    return 0
