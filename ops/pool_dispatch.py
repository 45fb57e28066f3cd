"""`dispatch: pool`: one task's training run as a flow run of the GPU deployment, waited for and retried.

The night creates a run of `train-and-evaluate/gpu` (the profile's `pool_deployment`) with every
parameter spelled out and a result path in the shared home, then polls the server until that run
is final. A completed run's `Trained` record is read from the result file (the model folder and
evaluation files it names are in the shared home too); nothing comes back through Prefect's result
storage. What can go wrong, and what the night does:
- no worker of the pool starts the run within `dispatch.pending_timeout` (default 15 min): the night
  cancels it and fails with one line naming the pool, which releases the per-home lock and the
  deployment's concurrency slot; with `dispatch.fallback: cpu` it trains that task in its own process
  on the cpu pool instead, and the summary says so;
- the worker stops (SIGTERM, as `docker compose stop` sends) or its machine dies: the run stops
  sending Prefect flow-run heartbeats (every 30 s, switched on for dispatched runs), and the server's
  automation `CRASH_AUTOMATION` (Prefect's zombie-run recipe, created by the night if missing) marks it
  Crashed within about a minute (55 s of silence; `SIMPAIR_CRASH_SILENT_SECONDS`, at least 35, sets it
  where the automation is made). A run that stays Running without touching its heartbeat file in the shared
  home for `lost_after_seconds` is marked Crashed by the night itself (a backstop for a server whose
  trigger service is off);
- a Crashed run is retried with the profile's retries and delays, whatever error it recorded on its
  way down; a Failed run is retried only when its recorded error is transient (a permanent failure,
  such as a missing backbone or a bad config, is not).
When the retries are spent the night fails as an in-process training failure does: nothing registered.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.client.schemas.responses import SetStateStatus
from prefect.deployments import run_deployment
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification
from prefect.states import Cancelled, Crashed, State

from simpair.nightly import dispatch
from simpair.nightly.night import training_arguments
from simpair.nightly.profile import NightlyProfile
from simpair.nightly.summary import Trained

POLL_SECONDS = 2.0
HEARTBEAT_SECONDS = 30  # Prefect's shortest flow-run heartbeat interval
SILENT_AFTER_SECONDS = 55  # one missed heartbeat and 25 s of slack for a busy machine
# The silence window, read where the automation is made (`deployments apply`, each `dispatch: pool`
# night): shorter means a stopped worker's run is retried sooner, but a heartbeat held up by a busy
# machine for longer than window - 30 s crashes a healthy run. At least 35 s.
SILENT_ENV = "SIMPAIR_CRASH_SILENT_SECONDS"
MIN_SILENT_SECONDS = HEARTBEAT_SECONDS + 5
WATCHED_TAG = "heartbeat-watched"
CRASH_AUTOMATION = "simpair: crash runs that stop sending heartbeats"


def crash_message(silent_seconds: int = SILENT_AFTER_SECONDS) -> str:
    """The state message of a run the automation crashed after `silent_seconds` without a heartbeat."""
    return (
        f"no flow-run heartbeat for {silent_seconds} s: its worker stopped (SIGTERM, SIGKILL) or its "
        "machine is gone"
    )


CRASH_MESSAGE = crash_message()


def silent_after_seconds() -> int:
    """The silence window: `$SIMPAIR_CRASH_SILENT_SECONDS` if set, else `SILENT_AFTER_SECONDS`."""
    raw = os.environ.get(SILENT_ENV, "").strip()
    if not raw:
        return SILENT_AFTER_SECONDS
    try:
        seconds = int(raw)
    except ValueError:
        raise ValueError(f"{SILENT_ENV}={raw!r}: expected whole seconds, e.g. 55") from None
    if seconds < MIN_SILENT_SECONDS:
        raise ValueError(
            f"{SILENT_ENV}={seconds}: at least {MIN_SILENT_SECONDS} s (Prefect's heartbeats come every "
            f"{HEARTBEAT_SECONDS} s, a shorter window crashes healthy runs)"
        )
    return seconds


FINAL_EVENTS = ("Completed", "Failed", "Cancelled", "Crashed")


class NoWorkerTookRun(dispatch.PoolRunFailed):
    """No worker of the pool started the dispatched run in time; the run was cancelled."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=False)


@dataclass(frozen=True)
class PoolTraining:
    """A task's `Trained` record, and a note for the summary when it ran elsewhere than on the pool."""

    trained: Trained
    note: str | None = None


def on_pool(plan: NightlyProfile, night_id: str, here: Callable[..., Trained]) -> Callable[..., Trained]:
    """The night's `train_here` step run on the pool: given the step's arguments, it trains the task as
    a run of the GPU deployment (`train_on_pool`); `here(**arguments)` is the fallback in this process.
    The record carries the fallback's note."""

    def train(task_name: str, home: str, **arguments: Any) -> Trained:
        fallback = partial(here, task_name=task_name, home=home, **arguments)
        done = train_on_pool(plan, task_name, Path(home), night_id, run_here=fallback)
        return done.trained.model_copy(update={"note": done.note}) if done.note else done.trained

    return train


def train_on_pool(
    plan: NightlyProfile,
    task_name: str,
    home: Path,
    night_id: str,
    run_here: Callable[[], Trained] | None = None,
) -> PoolTraining:
    """Run the task's training on the pool (retrying crashed, lost and transiently failed runs).
    `run_here` trains it in this process: the fallback when no worker took the run
    (`dispatch.fallback: cpu`)."""
    ensure_crash_detection()
    attempts = plan.retries.attempts + 1
    delays = plan.retries.delays_seconds
    for attempt in range(1, attempts + 1):
        path = dispatch.result_path(home, night_id, task_name, attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        # the night's `train_here` arguments, as JSON, and where the run writes its record
        parameters = {**_as_json(training_arguments(plan, task_name, home)), "result_path": str(path)}
        run = run_deployment(
            plan.pool_deployment,
            parameters=parameters,
            timeout=0,
            flow_run_name=f"{task_name}-{(night_id or 'night')[:8]}-{attempt}",
            tags=["nightly", task_name, WATCHED_TAG],
            job_variables={"env": {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_SECONDS)}},
        )
        print(
            f"[{task_name}] dispatched to {plan.pool_deployment}: flow run {run.name} ({run.id}), "
            f"attempt {attempt} of {attempts}"
        )
        try:
            return PoolTraining(_wait(run, path, plan))
        except NoWorkerTookRun as exc:
            if plan.dispatch.fallback != "cpu" or run_here is None:
                raise
            note = f"{task_name} trained on the cpu pool instead (dispatch.fallback: cpu): {exc}"
            print(f"[{task_name}] {note}")
            return PoolTraining(run_here(), note)
        except dispatch.PoolRunFailed as exc:
            if not exc.transient or attempt == attempts:
                raise
            delay = delays[min(attempt - 1, len(delays) - 1)] if delays else 0.0
            print(f"[{task_name}] {exc}; retrying in {delay:g} s")
            time.sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises


def _as_json(arguments: dict[str, Any]) -> dict[str, Any]:
    """Deployment parameters: models as their JSON dumps, (dataset, split) pairs as lists."""
    dumped = {k: v.model_dump(mode="json") if hasattr(v, "model_dump") else v for k, v in arguments.items()}
    return {**dumped, "eval_sets": [list(pair) for pair in arguments["eval_sets"]]}


def _wait(run: FlowRun, path: Path, plan: NightlyProfile) -> Trained:
    dispatched = time.monotonic()
    running_since: float | None = None
    with get_client(sync_client=True) as client:
        while True:
            current = client.read_flow_run(run.id)
            state = current.state
            if state is not None and state.is_completed():
                return dispatch.read_result(path)
            if state is not None and state.is_final():
                raise _ended(current, state, path)
            waited = time.monotonic() - dispatched
            if (
                state is not None
                and (state.is_scheduled() or state.is_pending())
                and waited > plan.dispatch.pending_timeout
            ):
                message = _not_taken(current, plan)
                if _cancel(client, current, message):
                    raise NoWorkerTookRun(message)
            if state is not None and state.is_running():
                running_since = running_since or time.time()
                silent = dispatch.seconds_since_heartbeat(path, running_since)
                if silent > plan.lost_after_seconds:
                    message = f"no heartbeat for {silent:.0f} s (worker or machine lost)"
                    client.set_flow_run_state(run.id, Crashed(message=message), force=True)
                    raise dispatch.PoolRunFailed(f"flow run {run.name} lost: {message}", transient=True)
            time.sleep(POLL_SECONDS)


def _ended(run: FlowRun, state: State, path: Path) -> dispatch.PoolRunFailed:
    """Why a final, not completed run failed, and whether a retry may help. A Crashed run is retried
    whatever it recorded: the error a run writes while its worker stops it (a termination signal) says
    nothing about the training itself."""
    recorded = dispatch.run_error(path)
    said = f"flow run {run.name} ended {state.type.value}: {state.message}"
    if state.is_crashed():
        if recorded is not None:
            said += f" (it recorded {recorded})"
        return dispatch.PoolRunFailed(said, transient=True)
    return recorded or dispatch.PoolRunFailed(said, transient=False)


def _not_taken(run: FlowRun, plan: NightlyProfile) -> str:
    """One line: which pool had no worker, and what to start."""
    pool = run.work_pool_name or plan.pool_deployment
    return (
        f"no worker of work pool {pool!r} started flow run {run.name} within "
        f"{_duration(plan.dispatch.pending_timeout)} (dispatch.pending_timeout), so the night cancelled it; "
        f"start one (`prefect worker start --pool {pool}`) and run the night again"
    )


def _cancel(client: SyncPrefectClient, run: FlowRun, message: str) -> bool:
    """Cancel a run no worker started; False if a worker took it meanwhile (the night waits on)."""
    result = client.set_flow_run_state(run.id, Cancelled(message=message))
    return result.status == SetStateStatus.ACCEPT


def _duration(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def crash_detection_automation() -> AutomationCore:
    """Prefect's zombie-run recipe (docs.prefect.io, "Detect and respond to zombie flows"), limited to
    the runs the night dispatches (tag `WATCHED_TAG`, heartbeats every `HEARTBEAT_SECONDS`): a run
    whose heartbeat (or start) is followed by neither another heartbeat nor a final state within
    `SILENT_AFTER_SECONDS` (or `$SIMPAIR_CRASH_SILENT_SECONDS`) is marked Crashed by the server."""
    silent = silent_after_seconds()
    return AutomationCore(
        name=CRASH_AUTOMATION,
        enabled=True,
        description="marks a dispatched training run Crashed when its worker stops or its machine dies",
        trigger=EventTrigger(
            # Running too: a worker stopped before the run's first heartbeat leaves it silent from the start
            after={"prefect.flow-run.heartbeat", "prefect.flow-run.Running"},
            expect={"prefect.flow-run.heartbeat", *(f"prefect.flow-run.{s}" for s in FINAL_EVENTS)},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            match_related=ResourceSpecification(
                {"prefect.resource.role": "tag", "prefect.resource.id": f"prefect.tag.{WATCHED_TAG}"}
            ),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=silent),
        ),
        actions=[ChangeFlowRunState(state=StateType.CRASHED, message=crash_message(silent))],
    )


def ensure_crash_detection() -> None:
    """Create `CRASH_AUTOMATION` on the server, or bring it up to date (idempotent, one API call or two)."""
    wanted = crash_detection_automation()
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name(CRASH_AUTOMATION)
        if not found:
            client.create_automation(wanted)
            return
        client.update_automation(found[0].id, wanted)
