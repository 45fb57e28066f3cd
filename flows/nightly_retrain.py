"""The nightly retraining flow: ingest -> pre-tokenize -> train each task -> evaluate -> register -> gate.

Failure rules, in the order they protect production:
- one nightly at a time per pipeline home (a file lock; deployments add `concurrency_limit=1`);
- the tracking store is checked before any work, with retries and backoff for transient faults;
- every task is trained and evaluated before anything is registered: a permanent failure in any
  training leaves the registry and its aliases exactly as they were and fails the run with a message;
- versions are registered first, `challenger` aliases moved after all exist, `champion` only by the gate.
When no source and no training config changed since the last successful night, training is skipped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from pydantic import BaseModel

from simpair.flows.ingest import ingest_flow
from simpair import settings
from simpair.catalog import Catalog
from simpair.ensemble import StackConfig, is_stack_config
from simpair.ensemble.train import threads_per_job
from simpair.registry import model_name
from simpair.registry.nightly import (
    NightlyProfile,
    NightlySummary,
    NightState,
    Retries,
    TaskOutcome,
    load_profile,
    nightly_lock,
    read_state,
    skip_reason,
    write_state,
)
from simpair.registry.tracking import config_hash
from simpair.training import TrainConfig
from simpair.tasks.registry import (
    check_tracking_task,
    gate_task,
    mark_challengers_task,
    register_model_task,
    retry_if_transient,
)
from simpair.tasks.side_by_side import submit_side_by_side
from simpair.tasks.training import combine_task, evaluate_task, pretokenize_task, train_task


class NightlyFailed(RuntimeError):
    """The night failed; the message says where and that the registry was left as it was."""


class NightPlan(BaseModel):
    """What tonight will do, decided after ingest."""

    dataset_versions: dict[str, str]
    config_hashes: dict[str, str]
    skip: str | None = None


class Trained(BaseModel):
    """One task's trained and evaluated model, ready to register."""

    task: str
    model_dir: str
    config: dict[str, Any]
    metrics: dict[str, Any]
    history: list[dict[str, Any]]
    eval_metrics: dict[str, Any]
    eval_artifacts: list[str]
    seconds: float


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
    catalog = Catalog(home)
    versions = {dataset: catalog.current_version(dataset) for dataset in catalog.datasets()}
    hashes = {name: config_hash(_config_dump(plan.config_path())) for name, plan in profile.tasks.items()}
    reason = None if force else skip_reason(read_state(home, profile.name), versions, hashes)
    return NightPlan(dataset_versions=versions, config_hashes=hashes, skip=reason)


def _config_dump(path: Path) -> dict[str, Any]:
    """The whole config a task trains from: a training config, or a stack config and its members'."""
    if is_stack_config(path):
        return StackConfig.from_yaml(path).full_dump()
    return TrainConfig.from_yaml(path).model_dump(mode="json")


def _build_stack(task_name: str, stack: StackConfig, home: str, retries: Retries, jobs: int) -> Path:
    """Every training config of the stack (nested stacks' included) pre-tokenized, then trained as
    its own task, `jobs` at a time; nested stacks are then combined bottom-up, this one last."""
    configs = stack.member_configs()
    for config in configs:
        _retrying(pretokenize_task, retries)(config, Path(home))
    trained = iter(_train_members(task_name, configs, home, retries, jobs))
    return _combine(task_name, stack, home, retries, trained)


def _train_members(
    task_name: str, configs: list[TrainConfig], home: str, retries: Retries, jobs: int
) -> list[Path]:
    """Model directories in config order. With jobs > 1, `jobs` trainings run side by side (a freed
    slot takes the next config at once), each in its own process with cores/jobs threads (as
    `simpair stack --jobs`)."""
    train = _retrying(train_task, retries)
    if jobs == 1:
        dirs = []
        for config in configs:
            print(f"[{task_name}] training {config.name}: {config.kind}-encoder, {config.epochs} epoch(s)")
            dirs.append(Path(train(config, Path(home)).model_dir))
        return dirs
    threads = threads_per_job(jobs)
    configs = [c.with_overrides(num_threads=c.num_threads or threads) for c in configs]
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


def _combine(
    task_name: str, stack: StackConfig, home: str, retries: Retries, trained: Iterator[Path]
) -> Path:
    members = []
    for item in stack.member_items():
        if isinstance(item, StackConfig):
            print(f"[{task_name}] stack member {item.name}: a {item.combine} of its own members")
            members.append(_combine(task_name, item, home, retries, trained))
        else:
            members.append(next(trained))
    return Path(_retrying(combine_task, retries)(stack, members, Path(home)))


def _train_stack(
    task_name: str,
    config_path: str,
    home: str,
    eval_sets: list[tuple[str, str]],
    retries: Retries,
    jobs: int,
) -> Trained:
    """Each member pre-tokenized and trained like a single model, then the stack fitted on dev."""
    started = time.monotonic()
    model_dir = _build_stack(task_name, StackConfig.from_yaml(config_path), home, retries, jobs)
    print(f"[{task_name}] evaluating {Path(model_dir).name} on {eval_sets}")
    evaluated = _retrying(evaluate_task, retries)(model_dir, Path(home), list(eval_sets))
    metrics = json.loads((Path(model_dir) / "metrics.json").read_text())
    return Trained(
        task=task_name,
        model_dir=str(model_dir),
        config=_config_dump(Path(config_path)),
        metrics={k: v for k, v in metrics.items() if k in ("dev", "dev_pairs", "dev_source")},
        history=[],
        eval_metrics=evaluated.metrics,
        eval_artifacts=[str(p) for p in [evaluated.report_path, *evaluated.plot_paths]],
        seconds=time.monotonic() - started,
    )


@flow(name="train-and-evaluate", log_prints=True)
def train_and_evaluate(
    task_name: str,
    config_path: str,
    home: str,
    eval_sets: list[tuple[str, str]],
    retries: Retries,
    jobs: int = 1,
) -> Trained:
    """Pre-tokenize, train and evaluate one task (the part a GPU deployment runs; tasks tagged `gpu`).

    A stack config (`members:`) trains each member, `jobs` at a time, then fits the stack on their
    shared dev split.
    """
    if is_stack_config(config_path):
        return _train_stack(task_name, config_path, home, eval_sets, retries, jobs)
    started = time.monotonic()
    config = TrainConfig.from_yaml(config_path)
    print(f"[{task_name}] pre-tokenizing for {config.name}")
    _retrying(pretokenize_task, retries)(config, Path(home))
    print(
        f"[{task_name}] training {config.name}: {config.kind}-encoder, {config.objective}, "
        f"{config.epochs} epoch(s)"
    )
    trained = _retrying(train_task, retries)(config, Path(home))
    print(f"[{task_name}] evaluating {Path(trained.model_dir).name} on {eval_sets}")
    evaluated = _retrying(evaluate_task, retries)(trained.model_dir, Path(home), list(eval_sets))
    return Trained(
        task=task_name,
        model_dir=str(trained.model_dir),
        config=config.model_dump(mode="json"),
        metrics={k: v for k, v in trained.metrics.items() if k != "history"},
        history=trained.history,
        eval_metrics=evaluated.metrics,
        eval_artifacts=[str(p) for p in [evaluated.report_path, *evaluated.plot_paths]],
        seconds=time.monotonic() - started,
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
) -> NightlySummary:
    """One night: see the module docstring for the failure rules."""
    plan = load_profile(profile)
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
        summary = NightlySummary(
            profile=plan.name,
            status="skipped",
            message=night.skip,
            dataset_versions=night.dataset_versions,
            seconds=time.monotonic() - started,
            flow_run_id=run_id,
        )
        publish_summary_task(summary)
        return summary

    trained: list[Trained] = []
    for name, task_plan in plan.tasks.items():
        try:
            trained.append(
                train_and_evaluate(
                    name,
                    str(task_plan.config_path()),
                    str(home),
                    task_plan.evaluate,
                    plan.retries,
                    task_plan.jobs,
                )
            )
        except Exception as exc:
            raise NightlyFailed(
                f"nightly ({plan.name}) failed while training {name!r} from {task_plan.config}: "
                f"{type(exc).__name__}: {exc}. Nothing was registered; registry and aliases are unchanged."
            ) from exc

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
        outcomes.append(
            TaskOutcome(
                task=t.task,
                model=model_name(t.task),
                version=version.version,
                decision=decision.outcome,
                reason=decision.reason,
                model_dir=t.model_dir,
                train_seconds=t.seconds,
            )
        )
    write_state(
        home,
        NightState(
            profile=plan.name,
            dataset_versions=night.dataset_versions,
            config_hashes=night.config_hashes,
            flow_run_id=run_id,
            versions={o.task: o.version or "" for o in outcomes},
            decisions={o.task: o.decision or "" for o in outcomes},
        ),
    )
    summary = NightlySummary(
        profile=plan.name,
        status="trained",
        message=f"trained {len(outcomes)} model(s); "
        + "; ".join(f"{o.model} v{o.version} {o.decision}" for o in outcomes),
        dataset_versions=night.dataset_versions,
        tasks=outcomes,
        seconds=time.monotonic() - started,
        flow_run_id=run_id,
    )
    publish_summary_task(summary)
    print(summary.message)
    return summary


def run(
    profile: str = "default",
    force: bool = False,
    home: str | Path | None = None,
    sources: str | Path | None = None,
    contracts: str | Path | None = None,
    wait_seconds: float | None = None,
) -> NightlySummary:
    """Run the flow; raise NightlyFailed with the flow's own message when the run failed (CLI, tests)."""
    state = nightly_retrain(
        profile,
        force,
        None if home is None else str(home),
        None if sources is None else str(sources),
        None if contracts is None else str(contracts),
        wait_seconds,
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
