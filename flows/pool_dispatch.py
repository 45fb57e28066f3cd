"""`dispatch: pool`: one task's training run as a flow run of the GPU deployment, waited for and retried.

The night creates a run of `train-and-evaluate/gpu` (the profile's `pool_deployment`) with every
parameter spelled out and a result path in the shared home, then polls the server until that run
is final. A completed run's `Trained` record is read from the result file (the model folder and
evaluation files it names are in the shared home too); nothing comes back through Prefect's result
storage. A run that crashed, or is lost (running, but no heartbeat for `lost_after_seconds`: the
worker or its machine died; the night marks it Crashed), or failed with a transient fault is retried
with the profile's retries and delays; a permanent failure (a missing backbone, a bad config) is not.
When the retries are spent the night fails as an in-process training failure does: nothing registered.
"""

from __future__ import annotations

import time
from pathlib import Path
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.states import Crashed

from simpair.nightly import dispatch
from simpair.nightly.profile import NightlyProfile, TaskPlan
from simpair.nightly.summary import Trained

POLL_SECONDS = 2.0


def train_on_pool(
    plan: NightlyProfile, task_name: str, task_plan: TaskPlan, home: Path, night_id: str
) -> Trained:
    """Run the task's training on the pool (retrying lost and transiently failed runs); its `Trained`."""
    attempts = plan.retries.attempts + 1
    delays = plan.retries.delays_seconds
    for attempt in range(1, attempts + 1):
        path = dispatch.result_path(home, night_id, task_name, attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        parameters = {
            "task_name": task_name,
            "config_path": str(task_plan.config_path()),
            "home": str(home),
            "eval_sets": [list(pair) for pair in task_plan.evaluate],
            "retries": plan.retries.model_dump(mode="json"),
            "jobs": task_plan.jobs,
            "result_path": str(path),
        }
        run = run_deployment(
            plan.pool_deployment,
            parameters=parameters,
            timeout=0,
            flow_run_name=f"{task_name}-{(night_id or 'night')[:8]}-{attempt}",
            tags=["nightly", task_name],
        )
        print(
            f"[{task_name}] dispatched to {plan.pool_deployment}: flow run {run.name} ({run.id}), "
            f"attempt {attempt} of {attempts}"
        )
        try:
            return _wait(run.id, run.name, path, plan.lost_after_seconds)
        except dispatch.PoolRunFailed as exc:
            if not exc.transient or attempt == attempts:
                raise
            delay = delays[min(attempt - 1, len(delays) - 1)] if delays else 0.0
            print(f"[{task_name}] {exc}; retrying in {delay:g} s")
            time.sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises


def _wait(run_id: UUID, name: str, path: Path, lost_after: float) -> Trained:
    running_since: float | None = None
    with get_client(sync_client=True) as client:
        while True:
            state = client.read_flow_run(run_id).state
            if state is not None and state.is_completed():
                return dispatch.read_result(path)
            if state is not None and state.is_final():
                recorded = dispatch.run_error(path)
                if recorded is not None:
                    raise recorded
                raise dispatch.PoolRunFailed(
                    f"flow run {name} ended {state.type.value}: {state.message}",
                    transient=state.is_crashed(),
                )
            if state is not None and state.is_running():
                running_since = running_since or time.time()
                silent = dispatch.seconds_since_heartbeat(path, running_since)
                if silent > lost_after:
                    message = f"no heartbeat for {silent:.0f} s (worker or machine lost)"
                    client.set_flow_run_state(run_id, Crashed(message=message), force=True)
                    raise dispatch.PoolRunFailed(f"flow run {name} lost: {message}", transient=True)
            time.sleep(POLL_SECONDS)
