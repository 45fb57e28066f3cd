"""Train a stack config: every training config first (side by side if asked), then the combiners.

`build_stack` is the one walk of a (possibly nested) stack config, shared by `simpair stack/soup
--config` (`train_stack`: trainings in worker processes) and the nightly flow (Prefect tasks): it
hands every training config, nested stacks' included, to one "train these" call, so all of them can
run side by side, then combines nested stacks bottom-up and this one last.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpair.ensemble.band_pool import read_pool
from simpair.ensemble.cascade_fit import fit_cascade
from simpair.ensemble.config import StackConfig
from simpair.ensemble.fit import fit_stack
from simpair.ensemble.soup import fit_soup
from simpair.models.io import new_model_dir
from simpair.stages import step
from simpair.training import TrainConfig, train
from simpair.training.pretokenize import pretokenize_config
from simpair.training.side_by_side import executor_side_by_side
from simpair.training.workers import share_cores, train_in_worker, worker_pool

TrainAll = Callable[[list[TrainConfig]], list[Path]]
Combine = Callable[[StackConfig, list[Path]], Path]


class MemberFailed(RuntimeError):
    """A member trained in a worker process failed; the message names it and carries the cause."""


@dataclass
class StackResult:
    model_dir: Path
    member_dirs: list[Path]
    metrics: dict[str, Any] = field(default_factory=dict)
    # the config's `evaluate_on` splits, as (dataset, split)
    evaluate_on: list[tuple[str, str]] = field(default_factory=list)


def build_members(
    config: StackConfig,
    train_all: TrainAll,
    combine: Combine,
    overrides: dict[str, Any] | None = None,
    on_nested: Callable[[StackConfig], None] | None = None,
    home: Path | None = None,
) -> list[Path]:
    """Each member's model directory of `config`, in member order.

    `train_all(configs)` trains every training config of the stack, nested stacks' included, in one
    call (so all of them can run side by side) and returns their directories in order; nested stacks
    are then combined bottom-up with `combine(stack, member_dirs)`. `on_nested` is told of each nested
    stack before its members are assembled.
    """
    check_band_pools(config, home, overrides)  # a missing pool or a test split fails before training
    trained = iter(train_all(config.member_configs(overrides)))
    return _assemble(config, trained, combine, overrides, on_nested)


def check_band_pools(config: StackConfig, home: Path | None, overrides: dict[str, Any] | None = None) -> None:
    """Every cascade pool of `config` and its nested stacks: a file that is there, a split that is
    ingested and not a test split. Raises ValueError naming the first that is not."""
    ref = config.band_pool_ref()
    if ref is not None and ref.split is not None:
        if home is None:
            raise ValueError(f"{config.name}: band_pool split {ref.split} needs the pipeline home")
        ref.check_split(home)
    for item in config.member_items(overrides):
        if isinstance(item, StackConfig):
            check_band_pools(item, home, overrides)


def build_stack(
    config: StackConfig,
    train_all: TrainAll,
    combine: Combine,
    overrides: dict[str, Any] | None = None,
    on_nested: Callable[[StackConfig], None] | None = None,
    home: Path | None = None,
) -> Path:
    """The stack (or soup) of `config`: its members from `build_members`, then `combine` of this one."""
    return combine(config, build_members(config, train_all, combine, overrides, on_nested, home))


def _assemble(
    config: StackConfig,
    trained: Iterator[Path],
    combine: Combine,
    overrides: dict[str, Any] | None,
    on_nested: Callable[[StackConfig], None] | None,
) -> list[Path]:
    dirs = []
    for item in config.member_items(overrides):
        if isinstance(item, StackConfig):
            if on_nested is not None:
                on_nested(item)
            dirs.append(combine(item, _assemble(item, trained, combine, overrides, on_nested)))
        else:
            dirs.append(next(trained))
    return dirs


def train_stack(
    config: StackConfig, home: str | Path, overrides: dict[str, Any] | None = None, jobs: int = 1
) -> StackResult:
    """Train every member (each a normal model directory under <home>/models), then fit the stack.

    `jobs` > 1 trains that many members at once, each in its own process (see `train_configs`).
    """
    home = Path(home)
    dirs = train_members(config, home, overrides, jobs)
    out = combine_members(config, dirs, home)
    metrics = json.loads((out / "metrics.json").read_text())
    return StackResult(model_dir=out, member_dirs=dirs, metrics=metrics)


def train_stack_file(
    path: str | Path,
    home: str | Path,
    overrides: dict[str, Any] | None = None,
    jobs: int = 1,
    out: Path | None = None,
    combine: str | None = None,
) -> StackResult:
    """`simpair stack --config` and `simpair soup --config`: train a stack or soup config's members,
    combine them, and move the result to `out` when given.

    `combine` ("stack" or "soup") refuses a config that combines the other way, naming the command
    that makes it (ValueError, like a config that does not validate).
    """
    config = StackConfig.from_yaml(path)
    if combine is not None and config.combine != combine:
        raise ValueError(
            f"{path} is a {config.combine} config (combine: {config.combine}); "
            f"make it with `simpair {config.combine} --config {path}`"
        )
    result = train_stack(config, home, overrides, jobs)
    if out is not None:
        result.model_dir.rename(out)
        result.model_dir = Path(out)
    result.evaluate_on = [(r.dataset, r.split) for r in config.evaluate_on]
    return result


def train_members(
    config: StackConfig, home: Path, overrides: dict[str, Any] | None = None, jobs: int = 1
) -> list[Path]:
    """Each member's model directory. Every training config, nested stacks' included, is trained
    first (so all of them can run side by side); nested stacks are then combined bottom-up."""
    return build_members(
        config,
        lambda configs: train_configs(configs, home, jobs),
        lambda stack, dirs: combine_members(stack, dirs, home),
        overrides,
        home=home,
    )


def train_configs(configs: list[TrainConfig], home: Path, jobs: int = 1) -> list[Path]:
    """Model directories of `configs`, in order; with jobs > 1, `jobs` at once in worker processes.

    A two-member stack on 2 cores then takes about the time of its longest member instead of the
    sum (see `simpair.training.workers`). A member without `num_threads` gets cores // jobs threads.
    Tokens are cached first, in this process, so the workers only read them. A freed worker takes
    the next config at once. On one GPU leave jobs at 1 (members would share the card).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    if jobs == 1 or len(configs) <= 1:
        return [train(c, home).model_dir for c in configs]
    for config in configs:
        pretokenize_config(config, home)
    payloads = [c.model_dump(mode="json") for c in share_cores(configs, jobs)]
    workers = min(jobs, len(configs))
    with worker_pool(workers) as pool:
        results = executor_side_by_side(
            pool,
            train_in_worker,
            [(payload, str(home)) for payload in payloads],
            workers,
            on_failure=lambda i, exc: MemberFailed(f"stack member {configs[i].name!r} failed: {exc}"),
        )
    return [Path(result.model_dir) for result in results]


@step("combine-members", tags=("gpu",), retries=1, retry_delay_seconds=10, profile_retries=True)
def combine_members(config: StackConfig, member_dirs: list[Path], home: Path) -> Path:
    """The stack, soup or cascade of trained members, as `<home>/models/<name>-<UTC time>`."""
    pool = read_pool(ref, home) if (ref := config.band_pool_ref()) else None  # before a model dir is made
    out = new_model_dir(Path(home) / "models", config.name)
    if config.combine == "soup":
        return fit_soup(member_dirs, home, out)
    if config.combine == "cascade":
        return fit_cascade(
            member_dirs, home, out, config.max_disagreement, zero_shot=config.zero_shot, pool=pool
        )
    return fit_stack(
        member_dirs,
        home,
        out,
        lexical=config.lexical,
        threshold_metric=config.threshold_metric,
        zero_shot=config.zero_shot,
        products=config.products,
    )
