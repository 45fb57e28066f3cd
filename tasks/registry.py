"""Prefect tasks for tracking, registration and the promotion gate: thin wrappers over `simpair.registry`.

Retries live here, on the decorators, where an operator looks for them: only faults that
`simpair.registry.faults.is_transient` calls transient are retried, with growing delays. The flow can
override counts and delays per profile with `.with_options`. Tasks that evaluate models carry the `gpu`
tag so a deployment (or a tag concurrency limit) can route or throttle them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import deployment, flow_run

from simpair.registry import faults, tracking
from simpair.registry.record import RegisteredVersion, mark_challengers, register_trained_model
from simpair.selection.gate import GateDecision, GatePolicy
from simpair.selection.precision_ladder import measure_precision
from simpair.selection.promotion import run_gate

DEFAULT_RETRIES = 3
DEFAULT_DELAYS = [10.0, 60.0, 300.0]


def retry_if_transient(task_: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry only transient faults (network, tracking store, I/O)."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception as err:  # the result itself may be unreadable
            exc = err
    return isinstance(exc, BaseException) and faults.is_transient(exc)


def flow_tags() -> dict[str, str]:
    """MLflow tags naming the Prefect flow run that made an MLflow run (empty outside a flow)."""
    run_id = flow_run.get_id()
    if not run_id:
        return {}
    return {
        "prefect.flow_run_id": str(run_id),
        "prefect.flow_run_name": str(flow_run.get_name() or ""),
        "prefect.flow_name": str(flow_run.get_flow_name() or ""),
        "prefect.deployment_id": str(deployment.get_id() or ""),
    }


_COMMON: dict[str, Any] = {
    "retries": DEFAULT_RETRIES,
    "retry_delay_seconds": DEFAULT_DELAYS,
    "retry_condition_fn": retry_if_transient,
    "cache_policy": NO_CACHE,
}


@task(name="check-tracking", tags=["mlflow"], **_COMMON)
def check_tracking_task(home: Path) -> str:
    """Fail fast, before hours of training, when the tracking store stays unreachable after retries."""
    return tracking.check_reachable(home)


@task(name="register-model", task_run_name="register-{model_dir.name}", tags=["mlflow"], **_COMMON)
def register_model_task(
    home: Path,
    model_dir: Path,
    config: Mapping[str, Any],
    metrics: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]] = (),
    eval_metrics: Mapping[str, Any] | None = None,
    eval_artifacts: Sequence[Path] = (),
) -> RegisteredVersion:
    """Log the training run and create a new version (no alias moves here).

    The night runs `measure_precision_task` first, so the version records the cached verdict
    (`simpair.precision.*` tags) for the gate report.
    """
    return register_trained_model(
        home, model_dir, config, metrics, history, eval_metrics, eval_artifacts, flow_tags=flow_tags()
    )


@task(name="measure-precision", task_run_name="precision-{model_dir.name}", cache_policy=NO_CACHE)
def measure_precision_task(home: Path, model_dir: Path) -> str | None:
    """The model's precision ladder on its dev split, cached beside it before it is registered
    (`simpair.selection.precision_ladder.measure_precision`, the step `--no-prefect` runs too)."""
    return measure_precision(home, model_dir)


@task(name="mark-challengers", tags=["mlflow"], **_COMMON)
def mark_challengers_task(home: Path, registered: Sequence[RegisteredVersion]) -> list[str]:
    """Point `challenger` at every new version, only once all of tonight's versions exist."""
    return mark_challengers(home, registered)


@task(name="promotion-gate", task_run_name="gate-{task_name}", tags=["mlflow", "gpu"], **_COMMON)
def gate_task(
    home: Path,
    task_name: str,
    policy: GatePolicy,
    eval_sets: Sequence[tuple[str, str]],
    version: str | None = None,
) -> GateDecision:
    """Evaluate challenger vs champion, record the decision, publish it as a markdown artifact."""
    decision = run_gate(home, task_name, policy, eval_sets, challenger_version=version, flow_tags=flow_tags())
    from simpair.registry import model_name

    create_markdown_artifact(
        key=f"gate-{task_name}",
        markdown=decision.to_markdown(model_name(task_name)),
        description=f"{model_name(task_name)} v{decision.challenger_version}: {decision.outcome}",
    )
    return decision
