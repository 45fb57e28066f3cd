"""Prefect tasks of the nightly retrain: the plan, the summary artifact, the night's report (written at
the night's end and by every scoring run, each time published as the `night-report` artifact),
members trained side by side, and the profile's retries put on the steps declared with `profile_retries`.

The DAGs are `simpair.nightly.night.run_night` (the night) and `simpair.nightly.train.run_training`
(one task's training); `flows/nightly_retrain.py` lists their steps' tasks (here, in
`simpair.tasks.training` and in `simpair.tasks.registry`) and hands them to `stages(...)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prefect import Task
from prefect.artifacts import create_markdown_artifact

from simpair.nightly.night import publish_summary
from simpair.nightly.plan import plan_night
from simpair.nightly.profile import Retries
from simpair.nightly.report import WrittenReport, add_scoring_run, publish_night_report
from simpair.nightly.summary import NightlySummary
from simpair.tasks.side_by_side import submit_side_by_side
from simpair.tasks.stages import Instead, PrefectStages, as_task, retry_if_transient, stage_of
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


def stages(steps: Iterable[Task | Instead], retries: Retries) -> PrefectStages:
    """`PrefectStages` over `steps`: tasks built from their steps' declarations, and steps run
    `instead` as a subflow or by a Prefect-aware function that submits tasks itself
    (`train_side_by_side_tasks`, `simpair.ops.pool_dispatch.on_pool`). A task whose step is declared
    with `profile_retries` gets the profile's retries (transient faults only)."""

    def policy(runs: Task | Instead) -> Task | Instead:
        declared = getattr(stage_of(runs), "__step__", None)
        if isinstance(runs, Instead) or declared is None or not declared.profile_retries:
            return runs
        return retrying(runs, retries)

    return PrefectStages([policy(runs) for runs in steps])


def _publish_summary(markdown: str, arguments: dict[str, Any]) -> None:
    summary: NightlySummary = arguments["summary"]
    create_markdown_artifact(
        key="nightly-retrain", markdown=markdown, description=f"{summary.profile}: {summary.status}"
    )


def _publish_report(written: WrittenReport, arguments: dict[str, Any]) -> None:
    alarms = f"; {written.alarms} drift alarm(s)" if written.alarms else ""
    create_markdown_artifact(
        key="night-report", markdown=written.markdown, description=f"{written.path}{alarms}"
    )


# the night's report page under <home>/reports/, as the `night-report` markdown artifact too
publish_night_report_task = as_task(publish_night_report, then=_publish_report)
# a scoring run added to the night's report (or one of its own), republished as `night-report`
add_scoring_run_task = as_task(add_scoring_run, then=_publish_report)
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
