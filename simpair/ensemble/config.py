"""`configs/<name>.yaml` for a stacked model: which training configs make its members.

A stack config is recognised by its `members:` key, so the nightly profile and `simpair stack
--config` can take it wherever a training config goes. Member paths are relative to the stack file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from simpair.ensemble.band_pool import BandPoolRef
from simpair.training.config import SplitRef, TrainConfig


class MemberRef(BaseModel):
    """A member written as a mapping: a training config plus overrides for this member only.

    Lets one file describe a recipe of variants (e.g. a soup of a seed of one learning rate and a
    seed of another) without a YAML file per variant. A plain string member is `{config: path}`.
    """

    model_config = ConfigDict(extra="forbid")

    config: str
    set: dict[str, Any] = Field(default_factory=dict)


class StackConfig(BaseModel):
    """Members (training configs, optionally once per seed) and how they become one model."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    task: Literal["paraphrase", "sts"]
    members: list[str | MemberRef] = Field(min_length=1)
    # stack: a linear model on the members' outputs; soup: one model, the members' averaged weights;
    # cascade: a bi-encoder scores every pair, the cross-encoder only those in a band fitted on dev
    combine: Literal["stack", "soup", "cascade"] = "stack"
    seeds: list[int] | None = None  # train every member config once per seed (soups of seeds)
    lexical: bool = True
    # stack only: add the members' outputs squared and multiplied pairwise (a degree-2 combiner)
    products: bool = False
    # stack: add the members' pre-trained backbone, untouched, as one more member (its cosine);
    # cascade: the backbone, untouched, is the bi stage (members: the cross-encoder alone)
    zero_shot: bool = False
    # cascade only: share of decisions on unseen pairs allowed to differ from the full cross-encoder's
    # (the band is fitted on dev by conformal risk control: simpair.ensemble.cascade_band.allowed_misses)
    max_disagreement: float = Field(default=0.005, ge=0.0, lt=1.0)
    # cascade only: unlabeled pairs like the traffic, fitted on beside dev (simpair.ensemble.band_pool)
    band_pool: BandPoolRef | None = None
    threshold_metric: Literal["accuracy", "f1"] = "accuracy"
    evaluate_on: list[SplitRef] = Field(default_factory=list)
    source: str | None = None  # the YAML file it was read from (member paths are relative to it)

    @model_validator(mode="after")
    def _zero_shot_only_in_stacks(self) -> StackConfig:
        if self.zero_shot and self.combine == "soup":
            raise ValueError("zero_shot adds a member to a stack; a soup averages trained weights only")
        if self.combine == "cascade" and self.task != "paraphrase":
            raise ValueError("a cascade decides paraphrase labels: task must be paraphrase")
        if self.band_pool is not None and self.combine != "cascade":
            raise ValueError(
                "band_pool is the pairs a cascade's band is fitted on; only combine: cascade has one"
            )
        evaluated = {f"{r.dataset}/{r.split}" for r in self.evaluate_on}
        if self.band_pool is not None and self.band_pool.split in evaluated:
            raise ValueError(
                f"band_pool split {self.band_pool.split} is in evaluate_on: the cascade's disagreement is "
                "measured there, so it cannot also fit the band"
            )
        if self.products and self.combine != "stack":
            raise ValueError("products are features of a stack's combiner; a soup has no combiner")
        return self

    def member_refs(self) -> list[MemberRef]:
        return [MemberRef(config=m) if isinstance(m, str) else m for m in self.members]

    def band_pool_ref(self) -> BandPoolRef | None:
        """`band_pool` with its path resolved against the config file's folder, checked to exist (a split
        is checked against the catalog by `BandPoolRef.check_split`)."""
        if self.band_pool is None or self.band_pool.path is None:
            return self.band_pool
        path = Path(self.band_pool.path).expanduser()
        base = Path(self.source).parent if self.source else Path.cwd()
        path = path if path.is_absolute() else base / path
        if not path.exists():
            raise ValueError(f"{self.name}: band_pool {path}: no such file or folder")
        return self.band_pool.model_copy(update={"path": str(path)})

    def member_paths(self) -> list[Path]:
        base = Path(self.source).parent if self.source else Path.cwd()
        paths = [Path(ref.config) for ref in self.member_refs()]
        return [p if p.is_absolute() else base / p for p in paths]

    def member_items(
        self, overrides: dict[str, Any] | None = None, _seen: tuple[str, ...] = ()
    ) -> list[TrainConfig | StackConfig]:
        """Each member: a validated training config, or a nested stack config (e.g. a soup of seeds
        as one member of a stack). Every member must train this stack's task."""
        here = str(Path(self.source).resolve()) if self.source else self.name
        if here in _seen:
            raise ValueError(f"{self.source}: stack configs include each other in a cycle")
        items: list[TrainConfig | StackConfig] = []
        for path, ref in zip(self.member_paths(), self.member_refs(), strict=True):
            if is_stack_config(path):
                if ref.set:
                    raise ValueError(f"{path}: `set` changes a training config; a nested stack sets its own")
                nested = StackConfig.from_yaml(path)
                if nested.task != self.task:
                    raise ValueError(f"{path}: is a {nested.task!r} stack but {self.name!r} is {self.task!r}")
                if self.seeds:
                    raise ValueError(f"{path}: seeds apply to training configs; a nested stack sets its own")
                nested.member_items(overrides, (*_seen, here))  # validate it all before training anything
                items.append(nested)
                continue
            config = TrainConfig.from_yaml(path)
            if ref.set:
                try:
                    config = config.with_overrides(**ref.set)
                except Exception as exc:
                    where = self.source or self.name
                    raise ValueError(f"{where}: member {path.name} set {ref.set}: {exc}") from exc
            if overrides:
                config = config.with_overrides(**overrides)
            if config.task != self.task:
                raise ValueError(
                    f"{path}: trains task {config.task!r} but stack {self.name!r} is {self.task!r}"
                )
            if self.seeds:
                items += [
                    config.with_overrides(seed=seed, name=f"{config.name}-s{seed}") for seed in self.seeds
                ]
            else:
                items.append(config)
        if len(items) + int(self.zero_shot) < 2:
            raise ValueError(
                f"{self.source or self.name}: {self.combine} needs two or more models (members x seeds)"
            )
        return items

    def member_configs(self, overrides: dict[str, Any] | None = None) -> list[TrainConfig]:
        """Every training config this stack trains, nested stacks' included, in training order."""
        configs: list[TrainConfig] = []
        for item in self.member_items(overrides):
            configs += item.member_configs(overrides) if isinstance(item, StackConfig) else [item]
        return configs

    def full_dump(self) -> dict[str, Any]:
        """This config and everything it trains, nested stacks included (the nightly's skip hash)."""
        return {
            "stack": self.model_dump(mode="json", exclude={"source"}),
            "members": [
                item.full_dump() if isinstance(item, StackConfig) else item.model_dump(mode="json")
                for item in self.member_items()
            ],
        }

    @classmethod
    def from_yaml(cls, path: str | Path) -> StackConfig:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
            return cls.model_validate({**data, "source": str(path)})
        except Exception as exc:
            raise ValueError(f"{path}: invalid stack config: {exc}") from exc


def is_stack_config(path: str | Path) -> bool:
    """True for a YAML file with a `members:` key (a stack), False for a training config."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "members" in data
