"""Train a stack config end to end: each member as its own training run, then the dev-fitted combiner."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpair.ensemble.config import StackConfig
from simpair.ensemble.fit import fit_stack
from simpair.ensemble.soup import fit_soup
from simpair.models.io import new_model_dir
from simpair.training import TrainConfig, TrainResult, train
from simpair.training.pretokenize import pretokenize_config
from simpair.training.progress_slot import claim_slot


class MemberFailed(RuntimeError):
    """A member trained in a worker process failed; the message names it and carries the cause."""


@dataclass
class StackResult:
    model_dir: Path
    member_dirs: list[Path]
    metrics: dict[str, Any] = field(default_factory=dict)


def train_stack(
    config: StackConfig, home: str | Path, overrides: dict[str, Any] | None = None, jobs: int = 1
) -> StackResult:
    """Train every member (each a normal model directory under <home>/models), then fit the stack.

    `jobs` > 1 trains that many members at once, each in its own process (see `train_configs`).
    """
    home = Path(home)
    member_dirs = train_members(config, home, overrides, jobs)
    out = combine_members(config, member_dirs, home)
    metrics = json.loads((out / "metrics.json").read_text())
    return StackResult(model_dir=out, member_dirs=member_dirs, metrics=metrics)


def train_members(
    config: StackConfig, home: Path, overrides: dict[str, Any] | None = None, jobs: int = 1
) -> list[Path]:
    """Each member's model directory. Every training config, nested stacks' included, is trained
    first (so all of them can run side by side); nested stacks are then combined bottom-up."""
    trained = iter(train_configs(config.member_configs(overrides), home, jobs))
    return _assemble(config, home, overrides, trained)


def _assemble(
    config: StackConfig, home: Path, overrides: dict[str, Any] | None, trained: Iterator[Path]
) -> list[Path]:
    dirs = []
    for item in config.member_items(overrides):
        if isinstance(item, StackConfig):
            dirs.append(combine_members(item, _assemble(item, home, overrides, trained), home))
        else:
            dirs.append(next(trained))
    return dirs


def available_cpus() -> int:
    """CPUs this process may run on (the container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def train_configs(configs: list[TrainConfig], home: Path, jobs: int = 1) -> list[Path]:
    """Model directories of `configs`, in order.

    Why processes: on CPU one training per process with its share of the cores beats one training
    using them all (measured here: one thread per training was ~3x faster than two threads, whose
    OpenMP workers spin), and a stack's members are independent until they are combined, so a
    two-member stack on 2 cores takes about the time of its longest member instead of the sum.
    A member without `num_threads` gets cores // jobs threads. Tokens are cached first, in this
    process, so the workers only read them. On one GPU leave jobs at 1 (members would share the card).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    if jobs == 1 or len(configs) <= 1:
        return [train(c, home).model_dir for c in configs]
    for config in configs:
        pretokenize_config(config, home)
    threads = threads_per_job(jobs)
    payloads = [
        c.with_overrides(num_threads=c.num_threads or threads).model_dump(mode="json") for c in configs
    ]
    with worker_pool(min(jobs, len(configs))) as pool:
        futures = [pool.submit(_train_in_worker, payload, str(home)) for payload in payloads]
        dirs = []
        for config, future in zip(configs, futures, strict=True):
            try:
                dirs.append(Path(future.result().model_dir))
            except Exception as exc:
                for pending in futures:
                    pending.cancel()
                raise MemberFailed(f"stack member {config.name!r} failed: {exc}") from exc
        return dirs


def worker_pool(workers: int, first_slot: int = 0) -> ProcessPoolExecutor:
    """Spawned training processes, each drawing its progress bars on a terminal line of its own
    (`first_slot`, the next, ...).

    Spawn, not fork: forking after torch has started its threads can deadlock. A worker runs one
    training at a time for the pool's life, so a slot per worker never has two bars on one line.
    """
    context = multiprocessing.get_context("spawn")
    next_slot = context.Value("i", first_slot)
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_claim_next_slot, initargs=(next_slot,)
    )


def _claim_next_slot(next_slot: Any) -> None:
    with next_slot.get_lock():
        claim_slot(next_slot.value)
        next_slot.value += 1


def _train_in_worker(config: dict[str, Any], home: str) -> TrainResult:
    return train(TrainConfig.model_validate(config), Path(home))


def train_in_process(config: TrainConfig, home: str | Path, progress_slot: int | None = None) -> TrainResult:
    """`train(config, home)` in a fresh spawned process: what lets a caller run several side by side.

    Threads cannot do it: torch's random generators and thread count are per process, so two
    trainings in one process would neither be reproducible nor keep to their share of the cores.
    `progress_slot` is the terminal line its progress bar draws on (distinct per running training).
    """
    with worker_pool(1, first_slot=progress_slot or 0) as pool:
        return pool.submit(_train_in_worker, config.model_dump(mode="json"), str(home)).result()


def threads_per_job(jobs: int) -> int:
    """Torch threads for each of `jobs` trainings running at once on this machine's CPUs."""
    return max(1, available_cpus() // jobs)


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
        products=config.products,
    )
