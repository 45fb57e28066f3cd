"""Train a stack config end to end: each member as its own training run, then the dev-fitted combiner."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpair.ensemble.config import StackConfig
from simpair.ensemble.fit import fit_stack
from simpair.ensemble.soup import fit_soup
from simpair.models.io import new_model_dir
from simpair.training import train


@dataclass
class StackResult:
    model_dir: Path
    member_dirs: list[Path]
    metrics: dict[str, Any] = field(default_factory=dict)


def train_stack(
    config: StackConfig, home: str | Path, overrides: dict[str, Any] | None = None
) -> StackResult:
    """Train every member (each a normal model directory under <home>/models), then fit the stack."""
    home = Path(home)
    member_dirs = train_members(config, home, overrides)
    out = combine_members(config, member_dirs, home)
    metrics = json.loads((out / "metrics.json").read_text())
    return StackResult(model_dir=out, member_dirs=member_dirs, metrics=metrics)


def train_members(config: StackConfig, home: Path, overrides: dict[str, Any] | None = None) -> list[Path]:
    """Each member's model directory: trained from its config, or a nested stack built bottom-up."""
    dirs = []
    for item in config.member_items(overrides):
        if isinstance(item, StackConfig):
            dirs.append(combine_members(item, train_members(item, home, overrides), home))
        else:
            dirs.append(train(item, home).model_dir)
    return dirs


def combine_members(config: StackConfig, member_dirs: list[Path], home: Path) -> Path:
    """The stack or soup of trained members, as `<home>/models/<name>-<UTC time>`."""
    out = new_model_dir(Path(home) / "models", config.name)
    if config.combine == "soup":
        return fit_soup(member_dirs, home, out)
    return fit_stack(
        member_dirs,
        home,
        out,
        lexical=config.lexical,
        threshold_metric=config.threshold_metric,
        zero_shot=config.zero_shot,
    )
