"""The nightly retraining flow: ingest -> pre-tokenize -> train each task -> evaluate -> register -> gate.

Failure rules, in the order they protect production:
- one nightly at a time per pipeline home (a file lock; deployments add `concurrency_limit=1`);
- the tracking store is checked before any work, with retries and backoff for transient faults;
- every task is trained and evaluated before anything is registered: a permanent failure in any
  training leaves the registry and its aliases exactly as they were and fails the run with a message;
- versions are registered first, `challenger` aliases moved after all exist, `champion` only by the gate.
When no source and no training config changed since the last successful night, training is skipped.
Each task trains in this process (`dispatch: local`) or as a run of the GPU deployment that the night
waits for (`dispatch: pool`, see `pool_dispatch.py`); the rules above hold either way.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from simpair import settings
from simpair.ensemble import StackConfig, is_stack_config
from simpair.ensemble.train import build_stack
from simpair.flows.ingest import ingest_flow
from simpair.flows.pool_dispatch import train_on_pool
from simpair.nightly import dispatch as pool_results
from simpair.nightly.lock import nightly_lock
from simpair.nightly.plan import NightPlan, config_dump, plan_night, write_state
from simpair.nightly.profile import NightlyProfile, Retries, TaskPlan, load_profile
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
from simpair.registry.wise_rule import WiseFtPolicy
from simpair.tasks.registry import (
    check_tracking_task,
    gate_task,
    mark_challengers_task,
    register_model_task,
    retry_if_transient,
)
from simpair.tasks.side_by_side import submit_side_by_side
from simpair.tasks.training import combine_task, evaluate_task, pretokenize_task, train_task, wise_ft_task
from simpair.training import TrainConfig
from simpair.training.workers import share_cores, threads_per_job

__all__ = ["NightlyFailed", "nightly_retrain", "run", "train_and_evaluate"]


def _retrying(task_: Any, retries: Retries) -> Any:
    """The task with the profile's retry policy (transient faults only)."""
    return task_.with_options(
        retries=retries.attempts,
        retry_delay_seconds=retries.delays_seconds or 0,
        retry_condition_fn=retry_if_transient,
    )


@task(name="plan-night", cache_policy=NO_CACHE)
def plan_night_task(profile: NightlyProfile, home: Path, force: bool) -> NightPlan:
    """Dataset versions after ingest, training-config hashes, and whether tonight can be skipped."""
    return plan_night(profile, home, force)


def _train_configs(
    task_name: str, configs: list[TrainConfig], home: str, retries: Retries, jobs: int
) -> list[Path]:
    """Every config pre-tokenized, then trained as its own task; model directories in config order.
    With jobs > 1, `jobs` trainings run side by side (a freed slot takes the next config at once),
    each in its own process with cores/jobs threads (as `simpair stack --jobs`)."""
    for config in configs:
        _retrying(pretokenize_task, retries)(config, Path(home))
    train = _retrying(train_task, retries)
    if jobs == 1:
        dirs = []
        for config in configs:
            print(f"[{task_name}] training {config.name}: {config.kind}-encoder, {config.epochs} epoch(s)")
            dirs.append(Path(train(config, Path(home)).model_dir))
        return dirs
    threads = threads_per_job(jobs)
    configs = share_cores(configs, jobs)
    results = submit_side_by_side(
        train,
        [{"config": config, "home": Path(home), "isolated": True} for config in configs],
        jobs,
        slot_argument="progress_slot",
        on_start=lambda i: print(
            f"[{task_name}] training {configs[i].name} ({jobs} at once, {threads} thread(s) each)"
        ),
    )
    return [Path(result.model_dir) for result in results]


def _train_stack(
    task_name: str,
    config_path: str,
    home: str,
    eval_sets: list[tuple[str, str]],
    retries: Retries,
    jobs: int,
    wise_ft: WiseFtPolicy | None = None,
) -> Trained:
    """Each member pre-tokenized and trained like a single model, then the stack fitted on dev
    (nested stacks combined bottom-up first, each as its own task), then the WiSE-FT choice if asked."""
    started = time.monotonic()
    model_dir = build_stack(
        StackConfig.from_yaml(config_path),
        lambda configs: _train_configs(task_name, configs, home, retries, jobs),
        lambda stack, members: Path(_retrying(combine_task, retries)(stack, members, Path(home))),
        on_nested=lambda nested: print(
            f"[{task_name}] stack member {nested.name}: a {nested.combine} of its own members"
        ),
    )
    if wise_ft is not None:
        model_dir = _choose_alpha(task_name, Path(model_dir), home, wise_ft, retries)
    print(f"[{task_name}] evaluating {Path(model_dir).name} on {eval_sets}")
    evaluated = _retrying(evaluate_task, retries)(model_dir, Path(home), list(eval_sets))
    return Trained.of_stack(
        task_name, model_dir, config_dump(Path(config_path)), evaluated, time.monotonic() - started
    )


def _choose_alpha(task_name: str, model_dir: Path, home: str, policy: WiseFtPolicy, retries: Retries) -> Path:
    print(f"[{task_name}] WiSE-FT path of {model_dir.name}: alphas {policy.grid()}")
    chosen = Path(_retrying(wise_ft_task, retries)(model_dir, Path(home), policy))
    record = json.loads((chosen / "metrics.json").read_text())["wise_ft"]
    print(f"[{task_name}] WiSE-FT {record['reason']}")
    return chosen


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
) -> Trained:
    """Pre-tokenize, train and evaluate one task (the part a GPU deployment runs; tasks tagged `gpu`).

    Only `task_name` is required: the training config, evaluation splits, retries and `jobs` default
    to that task's entry in the nightly `profile`, the home to `$SIMPAIR_HOME`. A stack config
    (`members:`) trains each member, `jobs` at a time, then fits the stack on their shared dev split.
    With `result_path` (a night dispatching to a work pool), the `Trained` record, or the error, is
    written there as JSON, and a heartbeat file beside it shows the run is alive.
    """
    if config_path is None or eval_sets is None or retries is None or jobs is None:
        plan = load_profile(profile)
        if task_name not in plan.tasks:
            raise ValueError(f"task {task_name!r} is not in nightly profile {profile!r}")
        task_plan = plan.tasks[task_name]
        config_path = config_path or str(task_plan.config_path())
        eval_sets = task_plan.evaluate if eval_sets is None else eval_sets
        retries = retries or plan.retries
        jobs = task_plan.jobs if jobs is None else jobs
        wise_ft = wise_ft or task_plan.wise_ft
    home = str(settings.home_dir(home))
    if result_path is None:
        return _train_and_evaluate(task_name, config_path, home, eval_sets, retries, jobs, wise_ft)
    with pool_results.heartbeat(Path(result_path)):
        try:
            trained = _train_and_evaluate(task_name, config_path, home, eval_sets, retries, jobs, wise_ft)
        except BaseException as exc:
            pool_results.write_error(Path(result_path), exc)
            raise
    pool_results.write_result(Path(result_path), trained)
    return trained


def _train_and_evaluate(
    task_name: str,
    config_path: str,
    home: str,
    eval_sets: list[tuple[str, str]],
    retries: Retries,
    jobs: int,
    wise_ft: WiseFtPolicy | None = None,
) -> Trained:
    if is_stack_config(config_path):
        return _train_stack(task_name, config_path, home, eval_sets, retries, jobs, wise_ft)
    started = time.monotonic()
    config = TrainConfig.from_yaml(config_path)
    print(f"[{task_name}] pre-tokenizing for {config.name}")
    _retrying(pretokenize_task, retries)(config, Path(home))
    print(
        f"[{task_name}] training {config.name}: {config.kind}-encoder, {config.objective}, "
        f"{config.epochs} epoch(s)"
    )
    trained = _retrying(train_task, retries)(config, Path(home))
    model_dir, metrics = Path(trained.model_dir), trained.metrics
    if wise_ft is not None:
        model_dir = _choose_alpha(task_name, model_dir, home, wise_ft, retries)
        metrics = json.loads((model_dir / "metrics.json").read_text())
    print(f"[{task_name}] evaluating {model_dir.name} on {eval_sets}")
    evaluated = _retrying(evaluate_task, retries)(model_dir, Path(home), list(eval_sets))
    return Trained.of_model(
        task_name,
        model_dir,
        config.model_dump(mode="json"),
        metrics,
        trained.history,
        evaluated,
        time.monotonic() - started,
    )


@task(name="publish-nightly-summary", cache_policy=NO_CACHE)
def publish_summary_task(summary: NightlySummary) -> None:
    create_markdown_artifact(
        key="nightly-retrain",
        markdown=summary.to_markdown(),
        description=f"{summary.profile}: {summary.status}",
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
    """One night: see the module docstring for the failure rules. `dispatch` (`local` or `pool`)
    overrides the profile's."""
    plan = load_profile(profile)
    if dispatch is not None:
        dumped = plan.model_dump()
        plan = plan.model_validate({**dumped, "dispatch": {**dumped["dispatch"], "mode": dispatch}})
    home_dir = settings.home_dir(home)
    wait = plan.lock_wait_seconds if wait_seconds is None else wait_seconds
    with nightly_lock(home_dir, wait):
        return _night(plan, force, home_dir, sources, contracts)


def _night(
    plan: NightlyProfile, force: bool, home: Path, sources: str | None, contracts: str | None
) -> NightlySummary:
    started = time.monotonic()
    print(f"nightly ({plan.name}): checking the tracking store")
    _retrying(check_tracking_task, plan.retries)(home)
    print("nightly: ingesting sources")
    ingest_flow(sources, str(home), contracts)
    night = plan_night_task(plan, home, force)
    run_id = str(flow_run.get_id() or "")
    if night.skip:
        print(night.skip)
        summary = skipped_summary(plan.name, night, time.monotonic() - started, run_id)
        publish_summary_task(summary)
        return summary

    trained: list[Trained] = []
    notes: list[str] = []  # tasks that trained elsewhere than the profile asked (dispatch.fallback)
    for name, task_plan in plan.tasks.items():

        def here(name: str = name, task_plan: TaskPlan = task_plan) -> Trained:
            return train_and_evaluate(
                name,
                str(task_plan.config_path()),
                str(home),
                task_plan.evaluate,
                plan.retries,
                task_plan.jobs,
                wise_ft=task_plan.wise_ft,
            )

        try:
            if plan.dispatch.mode == "pool":
                on_pool = train_on_pool(plan, name, task_plan, home, run_id, run_here=here)
                trained.append(on_pool.trained)
                notes += [on_pool.note] if on_pool.note else []
                continue
            trained.append(here())
        except Exception as exc:
            raise training_failed(plan.name, name, task_plan.config, exc) from exc

    print("nightly: registering new versions")
    register = _retrying(register_model_task, plan.retries)
    registered = [
        register(
            home,
            Path(t.model_dir),
            t.config,
            t.metrics,
            t.history,
            t.eval_metrics,
            [Path(p) for p in t.eval_artifacts],
        )
        for t in trained
    ]
    _retrying(mark_challengers_task, plan.retries)(home, registered)

    outcomes: list[TaskOutcome] = []
    gate = _retrying(gate_task, plan.retries)
    for t, version in zip(trained, registered, strict=True):
        task_plan = plan.tasks[t.task]
        print(f"nightly: promotion gate for {version.name} v{version.version}")
        decision = gate(home, t.task, task_plan.gate, task_plan.evaluate, version=version.version)
        outcomes.append(TaskOutcome.of(t, version.version, decision.outcome, decision.reason))
    _announce_rescore(plan, outcomes)
    write_state(home, success_state(plan.name, night, outcomes, run_id))
    summary = trained_summary(plan.name, night, outcomes, time.monotonic() - started, run_id)
    if notes:
        summary = summary.model_copy(update={"message": "; ".join([summary.message, *notes])})
    publish_summary_task(summary)
    print(summary.message)
    return summary


def _announce_rescore(plan: NightlyProfile, outcomes: list[TaskOutcome]) -> None:
    """The hand-off to scoring: `nightly-score` (started when this night completes) reads the same
    profile's `scoring.rescore_days_after_promotion` and, seeing a new champion, re-scores that window."""
    days = plan.scoring.rescore_days_after_promotion
    for outcome in outcomes:
        if days and outcome.decision == "promoted":
            print(
                f"nightly: {outcome.model} v{outcome.version} promoted; the next nightly-score run with "
                f"{outcome.model}@champion scores the batches of the last {days} day(s) again with it"
            )


def run(
    profile: str = "default",
    force: bool = False,
    home: str | Path | None = None,
    sources: str | Path | None = None,
    contracts: str | Path | None = None,
    wait_seconds: float | None = None,
    dispatch: str | None = None,
) -> NightlySummary:
    """Run the flow; raise NightlyFailed with the flow's own message when the run failed (CLI, tests)."""
    state = nightly_retrain(
        profile,
        force,
        None if home is None else str(home),
        None if sources is None else str(sources),
        None if contracts is None else str(contracts),
        wait_seconds,
        dispatch,
        return_state=True,
    )
    result = state.result(raise_on_failure=False)
    if isinstance(result, BaseException):
        raise NightlyFailed(str(result)) from result
    if state.is_failed():
        raise NightlyFailed(state.message or "nightly run failed")
    return result


if __name__ == "__main__":
    nightly_retrain()
