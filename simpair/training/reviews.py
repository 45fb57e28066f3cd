"""What a nightly task does with its reviewers' labels: train on some, judge on the others.

`simpair review import` writes the labels into a versioned dataset (`reviews` for paraphrase, 0/1;
`reviews-sts` for sts, 0-5) whose split follows the review queue a pair came from
(`data_contracts/reviews.yaml`): `train` holds the `uncertain` and `disputed` pairs, chosen by a model
because they are hard, so they teach; `traffic` holds the `random` ones, a uniform sample of the scored
traffic that no model chose, so a figure on them estimates the figure on the traffic itself.

A task's `reviews:` block in the nightly profile (`ReviewUse`) adds `train` to the training data and
names `traffic` as the gate's traffic split. `traffic` also joins the config's `evaluate_on`, so any
pair it shares with a training split (the leakage report's rule) is dropped from training: a pair used
to judge is never trained on. Nothing changes while the dataset has no such rows yet.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from simpair.catalog import Catalog, CatalogError
from simpair.training.config import SplitRef, TrainConfig

REVIEWS_DATASET = {"paraphrase": "reviews", "sts": "reviews-sts"}
TRAIN_SPLIT = "train"
TRAFFIC_SPLIT = "traffic"


class ReviewUse(BaseModel):
    """A nightly task's `reviews:` block: `{train: true, traffic_split: true}` by default."""

    model_config = ConfigDict(extra="forbid")

    train: bool = Field(
        True, description="add the reviewed uncertain and disputed pairs to the training data"
    )
    traffic_split: bool = Field(
        True, description="judge on the reviewed random pairs: the gate's `traffic` split (gate.traffic)"
    )
    dataset: str | None = Field(None, description="default: `reviews` for paraphrase, `reviews-sts` for sts")
    repeat: int = Field(
        1,
        ge=1,
        le=100,
        description="each reviewed training pair counted this many times per epoch: a few hundred reviews "
        "of the traffic's own domain beside thousands of other training pairs",
    )

    def dataset_for(self, task: str) -> str:
        return self.dataset or REVIEWS_DATASET[task]


def reviewed_rows(home: Path, dataset: str, split: str) -> int:
    """Rows of the current version's split; 0 when the dataset or the split does not exist yet."""
    try:
        path = Catalog(home).split_path(dataset, split)
    except CatalogError:
        return 0
    return int(pl.scan_parquet(path).select(pl.len()).collect().item())


def traffic_split(home: Path, task: str, use: ReviewUse | None) -> tuple[str, str] | None:
    """(dataset, `traffic`) when the task judges on its reviewed traffic and some exist; else None."""
    if use is None or not use.traffic_split:
        return None
    dataset = use.dataset_for(task)
    return (dataset, TRAFFIC_SPLIT) if reviewed_rows(home, dataset, TRAFFIC_SPLIT) else None


def with_reviews(config: TrainConfig, home: Path, use: ReviewUse | None) -> TrainConfig:
    """`config` with the reviewed training pairs added to `train` and the reviewed traffic pairs to
    `evaluate_on` (protected from training), each only when it has rows. The reviews' current version
    is read at training time; the night's skip rule already counts a new version as new data."""
    if use is None:
        return config
    dataset = use.dataset_for(config.task)
    train, evaluate_on = list(config.train), list(config.evaluate_on)
    labels = {ref.label() for ref in train}
    if use.train and reviewed_rows(home, dataset, TRAIN_SPLIT) and f"{dataset}/{TRAIN_SPLIT}" not in labels:
        train.append(SplitRef(dataset=dataset, split=TRAIN_SPLIT, repeat=use.repeat))
    traffic = traffic_split(home, config.task, use)
    if traffic and f"{dataset}/{TRAFFIC_SPLIT}" not in {ref.label() for ref in evaluate_on}:
        evaluate_on.append(SplitRef(dataset=dataset, split=TRAFFIC_SPLIT))
    if train == config.train and evaluate_on == config.evaluate_on:
        return config
    return config.with_overrides(train=train, evaluate_on=evaluate_on)
