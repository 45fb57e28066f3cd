"""The night's DAG, defined once: lock -> check tracking -> ingest -> plan -> train each task ->
measure each model's precision ladder -> register -> build each version's reference profile (drift
checks of its scoring runs) -> mark challengers -> gate -> summary. What the
`nightly-retrain` flow and `simpair nightly --no-prefect` run.

`run_night(plan, home, runner)` calls its stages through a `simpair.stages.StageRunner`: the flow hands
it `PrefectStages` over the tasks in `simpair.tasks.nightly` and `simpair.tasks.registry` (ingest and
each task's training run as subflows there), `night_in_process` a `RetryingInProcess`. The steps
declared with `profile_retries` (`@simpair.stages.step`) are retried on transient faults with the
profile's retries either way.

Failure rules, in the order they protect production:
- one night at a time per pipeline home: the lock is taken before anything else;
- the tracking store is checked before any work;
- every task is trained and evaluated before anything is registered: a permanent failure in any
  training leaves the registry and its aliases exactly as they were and fails the night with a message;
- versions are registered first, `challenger` aliases moved after all exist, `champion` only by the gate.
When no source and no training config changed since the last successful night, training is skipped.
Each task trains in this process (`dispatch: local`) or, in the flow only, as a run of the GPU
deployment the night waits for (`dispatch: pool`, `simpair.ops.pool_dispatch`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simpair import settings
from simpair.ingest import run_ingest
from simpair.ingest.report import IngestFailedError, IngestReport
from simpair.monitoring.reference import build_reference_profile
from simpair.nightly.lock import nightly_lock
from simpair.nightly.plan import plan_night, write_state
from simpair.nightly.profile import NightlyProfile, load_profile
from simpair.nightly.report import page_on_failure, publish_night_report
from simpair.nightly.retry import RetryingInProcess
from simpair.nightly.summary import (
    NightlyFailed,
    NightlySummary,
    TaskOutcome,
    Trained,
    skipped_summary,
    success_state,
    trained_summary,
    training_failed,
)
from simpair.nightly.train import train_here
from simpair.registry.record import RegisteredVersion, mark_challengers, register_trained_model
from simpair.registry.tracking import check_reachable
from simpair.selection.precision_ladder import measure_precision
from simpair.selection.promotion import run_gate
from simpair.stages import StageRunner, step
from simpair.training.reviews import traffic_split


def with_dispatch(plan: NightlyProfile, dispatch: str | None) -> NightlyProfile:
    """The profile with `dispatch.mode` set to `dispatch` (`local` or `pool`) when given."""
    if dispatch is None:
        return plan
    dumped = plan.model_dump()
    return plan.model_validate({**dumped, "dispatch": {**dumped["dispatch"], "mode": dispatch}})


def ingest_sources(sources: str | None, home: str, contracts: str | None) -> IngestReport:
    """Ingest every source; raise `IngestFailedError` when a source failed (the night stops there)."""
    report = run_ingest(sources, home, contracts)
    print(report.headline())
    if not report.ok:
        raise IngestFailedError(report)
    return report


def pool_needs_prefect(plan: NightlyProfile) -> NightlyFailed:
    """The one line an in-process night with `dispatch: pool` stops with."""
    return NightlyFailed(
        f"nightly ({plan.name}): dispatch: pool needs Prefect (a work pool and its workers): run the night "
        "without --no-prefect, or set dispatch: local"
    )


@step("publish-nightly-summary")
def publish_summary(summary: NightlySummary) -> str:
    """The night's summary as markdown (the flow publishes it as the `nightly-retrain` artifact)."""
    return summary.to_markdown()


def run_night(
    plan: NightlyProfile,
    home: Path,
    runner: StageRunner,
    *,
    force: bool = False,
    sources: str | Path | None = None,
    contracts: str | Path | None = None,
    wait_seconds: float | None = None,
    run_id: str = "",
) -> NightlySummary:
    """One night of `plan` in `home`, each stage run by `runner`; see the module docstring for the
    failure rules. `run_id` names the run in the registry tags and the state file (the flow run's id)."""
    wait = plan.lock_wait_seconds if wait_seconds is None else wait_seconds
    with nightly_lock(home, wait), page_on_failure(runner, home, plan.name, run_id) as begun:
        started = time.monotonic()
        print(f"nightly ({plan.name}): checking the tracking store")
        runner.run(check_reachable, home=home)
        print("nightly: ingesting sources")
        ingested = runner.run(
            ingest_sources, sources=_text(sources), home=str(home), contracts=_text(contracts)
        )
        night = runner.run(plan_night, profile=plan, home=home, force=force)
        if night.skip:
            print(night.skip)
            summary = skipped_summary(plan.name, night, time.monotonic() - started, run_id, ingested)
            runner.run(publish_summary, summary=summary)
            _report(runner, home, summary, begun)
            return summary

        trained, notes = _train_every_task(plan, home, runner, run_id)
        print("nightly: registering new versions")
        registered = register_all(trained, home, runner)
        if plan.monitor.enabled:
            attach_references(trained, registered, home, runner)
        runner.run(mark_challengers, home=home, registered=registered)
        outcomes: list[TaskOutcome] = []
        for t, version in zip(trained, registered, strict=True):
            task_plan = plan.tasks[t.task]
            print(f"nightly: promotion gate for {version.name} v{version.version}")
            decision = runner.run(
                run_gate, home=home, task=t.task, policy=task_plan.gate, eval_sets=task_plan.evaluate,
                challenger_version=version.version, traffic=traffic_split(home, t.task, task_plan.reviews),
            )  # fmt: skip
            outcomes.append(TaskOutcome.of(t, version.version, decision.outcome, decision.reason, decision))
        announce_rescore(plan, outcomes)
        write_state(home, success_state(plan.name, night, outcomes, run_id))
        summary = trained_summary(plan.name, night, outcomes, time.monotonic() - started, run_id, ingested)
        if notes:
            summary = summary.model_copy(update={"message": "; ".join([summary.message, *notes])})
        runner.run(publish_summary, summary=summary)
        print(summary.message)
        _report(runner, home, summary, begun)
        return summary


def _report(runner: StageRunner, home: Path, summary: NightlySummary, begun: str) -> None:
    """The night's report page (`simpair.nightly.report`), with the scoring runs of the last 24 h."""
    written = runner.run(publish_night_report, home=home, summary=summary, started_at=begun)
    print(f"nightly: report {written.path}")


def _train_every_task(
    plan: NightlyProfile, home: Path, runner: StageRunner, run_id: str
) -> tuple[list[Trained], list[str]]:
    """Every task trained and evaluated (nothing registered yet), and notes on tasks that trained
    elsewhere than the profile asked (`dispatch.fallback`). The flow runs `train_here` as the
    `train-and-evaluate` subflow, or (`dispatch: pool`) as a run of the GPU deployment."""
    trained: list[Trained] = []
    for name, task_plan in plan.tasks.items():
        try:
            trained.append(runner.run(train_here, **training_arguments(plan, name, home)))
        except Exception as exc:
            raise training_failed(plan.name, name, task_plan.config, exc) from exc
    return trained, [t.note for t in trained if t.note]


def training_arguments(plan: NightlyProfile, task_name: str, home: Path) -> dict[str, Any]:
    """What `train_here` (and the `train-and-evaluate` flow, here or on the pool) is given for one task."""
    task_plan = plan.tasks[task_name]
    return {
        "task_name": task_name,
        "config_path": str(task_plan.config_path()),
        "home": str(home),
        "eval_sets": task_plan.evaluate,
        "retries": plan.retries,
        "jobs": task_plan.jobs,
        "wise_ft": task_plan.wise_ft,
        "reviews": task_plan.reviews,
    }


def _text(value: str | Path | None) -> str | None:
    return None if value is None else str(value)


def register_all(trained: Sequence[Trained], home: Path, runner: StageRunner) -> list[RegisteredVersion]:
    """A new version per trained model, each after its precision ladder is measured and cached, so the
    flow and `--no-prefect` record the same `simpair.precision.*` tags for the gate report to show."""
    registered = []
    for t in trained:
        runner.run(measure_precision, home=home, model_dir=Path(t.model_dir))
        version = runner.run(
            register_trained_model, home=home, model_dir=Path(t.model_dir), config=t.config,
            metrics=t.metrics, history=t.history, eval_metrics=t.eval_metrics,
            eval_artifacts=[Path(p) for p in t.eval_artifacts],
        )  # fmt: skip
        registered.append(version)
    return registered


def attach_references(
    trained: Sequence[Trained], registered: Sequence[RegisteredVersion], home: Path, runner: StageRunner
) -> list[str | None]:
    """Each new version's reference profile, on the dev split it records, attached to its MLflow run
    (`simpair.monitoring.reference`): once the version exists and before `challenger` points at it, so
    every scoring run of a challenger or champion finds one. A model with no dev split gets None."""
    return [
        runner.run(build_reference_profile, home=home, model_dir=Path(t.model_dir), registered=version)
        for t, version in zip(trained, registered, strict=True)
    ]


def announce_rescore(plan: NightlyProfile, outcomes: list[TaskOutcome]) -> None:
    """The hand-off to scoring: `nightly-score` (started when this night completes) reads the same
    profile's `scoring.rescore_days_after_promotion` and, seeing a new champion, re-scores that window."""
    days = plan.scoring.rescore_days_after_promotion
    for outcome in outcomes:
        if days and outcome.decision == "promoted":
            print(
                f"nightly: {outcome.model} v{outcome.version} promoted; the next nightly-score run with "
                f"{outcome.model}@champion scores the batches of the last {days} day(s) again with it"
            )


def night_in_process(
    profile: str | Path = "default",
    force: bool = False,
    home: str | Path | None = None,
    sources: str | Path | None = None,
    contracts: str | Path | None = None,
    wait_seconds: float | None = None,
    dispatch: str | None = None,
) -> NightlySummary:
    """One night in this process, no Prefect (`simpair nightly --no-prefect`): the same DAG, stages
    and retries as the flow. `dispatch: pool` is refused before the lock is taken."""
    plan = with_dispatch(load_profile(profile), dispatch)
    if plan.dispatch.mode == "pool":
        raise pool_needs_prefect(plan)
    settings.sources_dir(sources)  # every night ingests first: no sources fails before anything is written
    home_dir = settings.home_dir(home)
    runner = RetryingInProcess(plan.retries)
    return run_night(
        plan, home_dir, runner, force=force, sources=sources, contracts=contracts, wait_seconds=wait_seconds
    )
