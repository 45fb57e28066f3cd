"""Prefect tasks of the nightly retrain: the plan, the summary artifact, members trained side by side,
and the profile's retries put on the stages the domain marks as retried.

The DAGs are `simpair.nightly.night.run_night` (the night) and `simpair.nightly.train.run_training`
(one task's training); `flows/nightly_retrain.py` maps each of their stages to a task here, in
`simpair.tasks.training` or in `simpair.tasks.registry`, and hands them `stages(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from prefect import Task
from prefect.artifacts import create_markdown_artifact

from simpair.nightly.night import publish_summary
from simpair.nightly.plan import plan_night
from simpair.nightly.profile import Retries
from simpair.nightly.summary import NightlySummary
from simpair.tasks.side_by_side import submit_side_by_side
from simpair.tasks.stages import PrefectStages, as_task, retry_if_transient, stage_of
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
    tasks: Iterable[Task],
    retries: Retries,
    runs: Mapping[Callable[..., Any], Any] | None = None,
    retried: Collection[Callable[..., Any]] = (),
) -> PrefectStages:
    """`PrefectStages` over `tasks` (built from their steps' declarations) and `runs` (a step run as a
    subflow, or by a Prefect-aware function that submits tasks itself: `train_side_by_side_tasks`,
    `simpair.ops.pool_dispatch.on_pool`). A task whose step is declared with `profile_retries`, and a
    step in `retried`, gets the profile's retries."""

    def policy(stage: Callable[..., Any], runs_it: Any) -> Any:
        declared = getattr(stage, "__step__", None)
        if stage in retried or (declared is not None and declared.profile_retries):
            return retrying(runs_it, retries)
        return runs_it

    return PrefectStages(
        [policy(stage_of(t), t) for t in tasks],
        {stage: policy(stage, runs_it) for stage, runs_it in (runs or {}).items()},
    )


def _publish_summary(markdown: str, arguments: dict[str, Any]) -> None:
    summary: NightlySummary = arguments["summary"]
    create_markdown_artifact(
        key="nightly-retrain", markdown=markdown, description=f"{summary.profile}: {summary.status}"
    )


# dataset versions after ingest, training-config hashes, and whether tonight can be skipped
plan_night_task = as_task(plan_night)
# the night's summary as the `nightly-retrain` markdown artifact
publish_summary_task = as_task(publish_summary, then=_publish_summary)


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
