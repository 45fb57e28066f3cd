"""Trainings in worker processes, each with its share of the cores and its own progress line.

Why processes: on CPU one training per process with its share of the cores beats one training using
them all (measured here: one thread per training was ~3x faster than two threads, whose OpenMP
workers spin), and torch's random generators and thread count are per process, so two trainings in
one process would neither be reproducible nor keep to their share. On one GPU keep one training at a
time (trainings would share the card).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from simpair.stages import step
from simpair.training.config import TrainConfig
from simpair.training.loop import TrainResult
from simpair.training.progress_slot import claim_slot
from simpair.training.trainer import train

# The longest a training may run; past it the night fails that task with a clear line instead of holding
# its lock and its deployment slot. A training in a worker process is stopped here, by this process (a
# Prefect task timeout cannot interrupt a task running in a worker thread, as side-by-side trainings do).
TRAIN_TIMEOUT_SECONDS = 4 * 3600


class TrainingTimedOut(RuntimeError):
    """A training stopped at its time limit. Not a TimeoutError: the night retries those as transient,
    and a training that ran for hours would only run for hours again."""


def available_cpus() -> int:
    """CPUs this process may run on (the container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def threads_per_job(jobs: int) -> int:
    """Torch threads for each of `jobs` trainings running at once on this machine's CPUs."""
    return max(1, available_cpus() // jobs)


def share_cores(configs: list[TrainConfig], jobs: int) -> list[TrainConfig]:
    """The configs with cores // jobs torch threads each, unless a config sets its own `num_threads`."""
    threads = threads_per_job(jobs)
    return [c.with_overrides(num_threads=c.num_threads or threads) for c in configs]


def worker_pool(workers: int, first_slot: int = 0) -> ProcessPoolExecutor:
    """Training processes, each drawing its progress bars on a terminal line of its own
    (`first_slot`, the next, ...).

    Workers come from a fork server, not from a fork of this process: forking after torch has started
    its threads can deadlock, while the server is a fresh process that has only imported the training
    code (torch, transformers: about 10 s of CPU on 2 cores) and starts no threads. Each worker then
    starts with that code loaded instead of importing it again, as a spawned one would; the server
    lives as long as this process, so later pools reuse it. A worker runs one training at a time for
    the pool's life, so a slot per worker never has two bars on one line.
    """
    context = _training_context()
    next_slot = context.Value("i", first_slot)
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_claim_next_slot, initargs=(next_slot,)
    )


def _training_context() -> Any:
    """The fork server where the platform has one (Linux, macOS), preloaded with the training code;
    spawn elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])  # takes effect when the server starts; later calls are no-ops
    return context


def _claim_next_slot(next_slot: Any) -> None:
    with next_slot.get_lock():
        claim_slot(next_slot.value)
        next_slot.value += 1


def train_in_worker(config: dict[str, Any], home: str) -> TrainResult:
    """`train` of a config given as JSON-ready data (what a worker process receives)."""
    return train(TrainConfig.model_validate(config), Path(home))


def train_in_process(
    config: TrainConfig,
    home: str | Path,
    progress_slot: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_SECONDS,
) -> TrainResult:
    """`train(config, home)` in a fresh worker process: what lets a caller run several side by side.

    `progress_slot` is the terminal line its progress bar draws on (distinct per running training).
    Past `timeout` seconds the worker is killed and TrainingTimedOut names the training.
    """
    pool = worker_pool(1, first_slot=progress_slot or 0)
    try:
        future = pool.submit(train_in_worker, config.model_dump(mode="json"), str(home))
        return future.result(timeout=timeout)
    except FutureTimeout:
        for process in list(getattr(pool, "_processes", {}).values()):  # the executor has no kill()
            process.kill()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    # raised outside the handler: with the TimeoutError as its context, the night would call it transient
    raise TrainingTimedOut(f"training {config.name} ran past its limit of {timeout:g} s and was stopped")


# Prefect's timeout on the task too; side by side the training process enforces it (`timeout`)
@step("train", tags=("gpu",), timeout_seconds=TRAIN_TIMEOUT_SECONDS, profile_retries=True)
def train_model(
    config: TrainConfig,
    home: str | Path,
    isolated: bool = False,
    progress_slot: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_SECONDS,
) -> TrainResult:
    """Train one model here, or with `isolated` in a fresh process (`train_in_process`, stopped past
    `timeout` seconds): trainings going side by side then share neither torch's random state nor its
    thread pool."""
    if isolated:
        return train_in_process(config, home, progress_slot, timeout)
    return train(config, Path(home))
