"""The nightly retraining flows: `nightly-retrain` (one night) and `train-and-evaluate` (one task).

The DAGs are `simpair.nightly.night.run_night` and `simpair.nightly.train.run_training`, the same ones
`simpair nightly --no-prefect` runs in process (see their docstrings for the failure rules); these
flows run each of their stages as the Prefect task (or subflow) wired below:

    lock -> check-tracking -> ingest (subflow) -> plan-night
    -> train-and-evaluate (subflow per task: pretokenize -> train, members side by side
       -> combine-members -> wise-ft -> evaluate), or a run of the GPU deployment (`dispatch: pool`)
    -> measure-precision -> register-model (per task) -> build-reference-profile (per task)
    -> mark-challengers -> promotion-gate (per task) -> publish-nightly-summary
    -> publish-night-report (the night's report page, simpair.nightly.report)

Retries (the profile's, transient faults only) are put on the steps declared with `profile_retries`.
`simpair.flows.launch.nightly` starts the night from Python and raises `NightlyFailed` on failure.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

from simpair import settings
from simpair.flows.ingest import ingest_flow
from simpair.nightly.dispatch import recorded
from simpair.nightly.night import ingest_sources, run_night, with_dispatch
from simpair.nightly.profile import Retries, load_profile
from simpair.nightly.summary import NightlySummary, Trained
from simpair.nightly.train import TrainingJob, run_training, train_here, train_side_by_side
from simpair.ops.pool_dispatch import on_pool
from simpair.selection.wise_rule import WiseFtPolicy
from simpair.tasks.nightly import (
    plan_night_task,
    publish_night_report_task,
    publish_summary_task,
    stages,
    train_side_by_side_tasks,
)
from simpair.tasks.registry import (
    build_reference_task,
    check_tracking_task,
    gate_task,
    mark_challengers_task,
    measure_precision_task,
    register_model_task,
)
from simpair.tasks.stages import instead
from simpair.tasks.training import combine_task, evaluate_task, pretokenize_task, train_task, wise_ft_task
from simpair.training.reviews import ReviewUse

# one task's training steps, each as its Prefect task (all tagged `gpu`), in the order `run_training`
# runs them
TRAINING = (
    pretokenize_task,
    train_task,
    instead(train_side_by_side, train_side_by_side_tasks),  # one `train` task per member, `jobs` at a time
    combine_task,  # stack, soup or cascade, fitted on dev
    wise_ft_task,
    evaluate_task,
)


@flow(name="train-and-evaluate", log_prints=True)
def train_and_evaluate(
    task_name: str,
    config_path: str | None = None,
    home: str | None = None,
    eval_sets: list[tuple[str, str]] | None = None,
    retries: Retries | None = None,
    jobs: int | None = None,
    profile: str = "default",
    result_path: str | None = None,
    wise_ft: WiseFtPolicy | None = None,
    reviews: ReviewUse | None = None,
) -> Trained:
    """Pre-tokenize, train and evaluate one task (the part a GPU deployment runs; tasks tagged `gpu`).

    Only `task_name` is required: the rest defaults to that task's entry in the nightly `profile`, the
    home to `$SIMPAIR_HOME`. With `result_path` (a night dispatching to a work pool), the `Trained`
    record, or the error, is written there as JSON, and a heartbeat file beside it shows the run is alive.
    """
    job = TrainingJob.resolve(
        task_name, config_path, home, eval_sets, retries, jobs, profile, wise_ft, reviews
    )
    runner = stages(TRAINING, job.retries)
    return recorded(None if result_path is None else Path(result_path), partial(run_training, job, runner))


# the night's steps, each as its Prefect task, in the order `run_night` runs them; ingest and each
# task's training (`train_here`) run as subflows (below), or a task's training as a run of the GPU
# deployment (`dispatch: pool`)
NIGHT = (
    check_tracking_task,
    # ingest_sources: the `ingest` subflow
    plan_night_task,
    # train_here, per task: the `train-and-evaluate` subflow, here or on the pool
    measure_precision_task,  # per task: the precision ladder, cached beside the model
    register_model_task,  # per task, once every task is trained
    build_reference_task,  # per task: the version's reference profile (monitor.enabled)
    mark_challengers_task,
    gate_task,  # per task
    publish_summary_task,  # the `nightly-retrain` artifact
    publish_night_report_task,  # <home>/reports/<date>-<run>/night.md, the `night-report` artifact
)


@flow(name="nightly-retrain", log_prints=True)
def nightly_retrain(
    profile: str = "default",
    force: bool = False,
    home: str | None = None,
    sources: str | None = None,
    contracts: str | None = None,
    wait_seconds: float | None = None,
    dispatch: str | None = None,
) -> NightlySummary:
    """One night of `profile`; `dispatch` (`local` or `pool`) overrides the profile's."""
    plan = with_dispatch(load_profile(profile), dispatch)
    run_id = str(flow_run.get_id() or "")
    train = on_pool(plan, run_id, train_and_evaluate) if plan.dispatch.mode == "pool" else train_and_evaluate
    runner = stages([*NIGHT, instead(ingest_sources, ingest_flow), instead(train_here, train)], plan.retries)
    return run_night(
        plan, settings.home_dir(home), runner, force=force, sources=sources, contracts=contracts,
        wait_seconds=wait_seconds, run_id=run_id,
    )  # fmt: skip


if __name__ == "__main__":
    nightly_retrain()
