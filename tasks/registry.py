"""Prefect tasks for tracking, registration and the promotion gate, each built from its step's
declaration (`simpair.tasks.stages.as_task`): retries, delays and tags are on the domain function.

Only faults that `simpair.registry.faults.is_transient` calls transient are retried, with growing
delays; the nightly flow puts the profile's counts and delays on them instead (`simpair.tasks.nightly`).
Tasks that evaluate models carry the `gpu` tag so a deployment (or a tag concurrency limit) can route
or throttle them.
"""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_markdown_artifact
from prefect.runtime import deployment, flow_run

from simpair.monitoring.reference import build_reference_profile
from simpair.registry import model_name
from simpair.registry.record import mark_challengers, register_trained_model
from simpair.registry.tracking import check_reachable
from simpair.selection.gate import GateDecision
from simpair.selection.precision_ladder import measure_precision
from simpair.selection.promotion import run_gate
from simpair.tasks.stages import as_task, retry_if_transient

__all__ = [
    "build_reference_task",
    "check_tracking_task",
    "flow_tags",
    "gate_task",
    "mark_challengers_task",
    "measure_precision_task",
    "register_model_task",
    "retry_if_transient",
]


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


def _tagged() -> dict[str, Any]:
    return {"flow_tags": flow_tags()}


def _publish_decision(decision: GateDecision, arguments: dict[str, Any]) -> None:
    name = model_name(arguments["task"])
    create_markdown_artifact(
        key=f"gate-{arguments['task']}",
        markdown=decision.to_markdown(name),
        description=f"{name} v{decision.challenger_version}: {decision.outcome}",
    )


# fail fast, before hours of training, when the tracking store stays unreachable after retries
check_tracking_task = as_task(check_reachable)
# the model's precision ladder on its dev split, cached beside it before it is registered, so the
# version records the verdict (`simpair.precision.*` tags) for the gate report
measure_precision_task = as_task(measure_precision)
# the training run logged and a new version created (no alias moves here), tagged with the flow run
register_model_task = as_task(register_trained_model, adds=_tagged)
# the new version's reference profile on its dev split, attached to its run (drift checks of scoring)
build_reference_task = as_task(build_reference_profile)
# `challenger` on every new version, only once all of tonight's versions exist
mark_challengers_task = as_task(mark_challengers)
# challenger vs champion, the decision recorded and published as a markdown artifact
gate_task = as_task(run_gate, adds=_tagged, then=_publish_decision)
