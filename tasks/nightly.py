"""Prefect tasks of the nightly retrain: the plan, the summary artifact, members trained side by side,
and the profile's retries put on the stages the domain marks as retried.

The DAGs are `simpair.nightly.night.run_night` (the night) and `simpair.nightly.train.run_training`
(one task's training); `flows/nightly_retrain.py` maps each of their stages to a task here, in
`simpair.tasks.training` or in `simpair.tasks.registry`, and hands them `stages(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from prefect import Task, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from simpair.nightly.plan import NightPlan, plan_night
from simpair.nightly.profile import NightlyProfile, Retries
from simpair.nightly.summary import NightlySummary
from simpair.tasks.registry import retry_if_transient
from simpair.tasks.side_by_side import submit_side_by_side
from simpair.tasks.stages import PrefectStages
from simpair.tasks.training import side_by_side_train_task
from simpair.training import TrainConfig
from simpair.training.workers import share_cores, threads_per_job


def retrying(task_: Task, retries: Retries) -> Task:
    """The task with the profile's retry policy (transient faults only)."""
    return task_.with_options(
        retries=retries.attempts,
        retry_delay_seconds=retries.delays_seconds or 0,
        retry_condition_fn=retry_if_transient,
    )


def stages(
    tasks: Mapping[Callable[..., Any], Any], retried: Collection[Callable[..., Any]], retries: Retries
) -> PrefectStages:
    """`PrefectStages` over `tasks`, the stages in `retried` with the profile's retries. A stage maps to
    its task, to a flow (run as a subflow), or to a Prefect-aware function that submits tasks itself
    (`train_side_by_side_tasks`, `simpair.ops.pool_dispatch.train_on_pool`)."""
    return PrefectStages(
        {stage: retrying(runs, retries) if stage in retried else runs for stage, runs in tasks.items()}
    )


@task(name="plan-night", cache_policy=NO_CACHE)
def plan_night_task(profile: NightlyProfile, home: Path, force: bool) -> NightPlan:
    """Dataset versions after ingest, training-config hashes, and whether tonight can be skipped."""
    return plan_night(profile, home, force)


@task(name="publish-nightly-summary", cache_policy=NO_CACHE)
def publish_summary_task(summary: NightlySummary) -> str:
    """The night's summary as the `nightly-retrain` markdown artifact."""
    markdown = summary.to_markdown()
    create_markdown_artifact(
        key="nightly-retrain", markdown=markdown, description=f"{summary.profile}: {summary.status}"
    )
    return markdown


def train_side_by_side_tasks(
    task_name: str, configs: list[TrainConfig], home: Path, jobs: int, retries: Retries
) -> list[Path]:
    """Each config its own `train` task, `jobs` at a time, each in its own process with cores/jobs
    threads (as `simpair stack --jobs`); model directories in config order."""
    threads = threads_per_job(jobs)
    configs = share_cores(configs, jobs)
    results = submit_side_by_side(
        retrying(side_by_side_train_task(), retries),
        [{"config": config, "home": Path(home), "isolated": True} for config in configs],
        jobs,
        slot_argument="progress_slot",
        on_start=lambda i: print(
            f"[{task_name}] training {configs[i].name} ({jobs} at once, {threads} thread(s) each)"
        ),
    )
    return [Path(result.model_dir) for result in results]
