"""`dispatch: pool` and the local stack, without workers: result files, heartbeats, retries, refusals.

The real thing (servers, workers, a stopped worker) is tests/test_stack_e2e.py; these check the
decisions it relies on in seconds: what a training run on the pool writes back through the shared
home, and, against the temporary Prefect API with a stand-in worker that sets run states, how the
night tells a retry from a failure (a Crashed run is retried whatever it recorded), when a silent
run counts as lost, what it does when no worker starts a run within `dispatch.pending_timeout`
(cancel and fail naming the pool, or `fallback: cpu`); that the profile setting defaults to
`local`, and that `serve` and the stack commands say what is wrong instead of running on a
temporary API.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from simpair.nightly import dispatch
from simpair.nightly.profile import DispatchPlan, load_profile
from simpair.nightly.summary import Trained
from simpair.ops import local_stack


def _trained(tmp_path: Path) -> Trained:
    return Trained(
        task="sts",
        model_dir=str(tmp_path / "models" / "smoke-sts"),
        config={"name": "smoke-sts"},
        metrics={"dev": {"spearman": 0.1}},
        history=[{"epoch": 1, "train_loss": 0.5}],
        eval_metrics={"stsb/test": {"spearman": 0.2}},
        eval_artifacts=[str(tmp_path / "report.md")],
        seconds=1.5,
    )


def test_a_result_travels_through_the_shared_home(tmp_path: Path) -> None:
    path = dispatch.result_path(tmp_path, "0123abcd", "sts", 2)
    assert path == tmp_path / "nightly" / "dispatch" / "0123abcd" / "sts-2.json"
    path.parent.mkdir(parents=True)
    with pytest.raises(dispatch.PoolRunFailed, match="wrote no result") as missing:
        dispatch.read_result(path)
    assert missing.value.transient and dispatch.run_error(path) is None
    dispatch.write_result(path, _trained(tmp_path))
    assert dispatch.read_result(path) == _trained(tmp_path)
    assert dispatch.run_error(path) is None


@pytest.mark.parametrize(
    ("error", "transient"),
    [(ConnectionRefusedError("tracking store down"), True), (FileNotFoundError("no-such-backbone"), False)],
)
def test_a_failed_run_records_its_error_and_whether_a_retry_may_help(
    tmp_path: Path, error: Exception, transient: bool
) -> None:
    path = tmp_path / "paraphrase-1.json"
    dispatch.write_error(path, error)
    recorded = dispatch.run_error(path)
    assert recorded is not None and recorded.transient is transient
    assert type(error).__name__ in str(recorded) and str(error) in str(recorded)


def test_a_run_without_heartbeat_is_lost_after_the_profiles_limit(tmp_path: Path) -> None:
    path = tmp_path / "sts-1.json"
    started = time.time()
    assert dispatch.seconds_since_heartbeat(path, started - 100) >= 100  # never beat: since it ran
    with dispatch.heartbeat(path, every=0.05):
        time.sleep(0.2)
        assert dispatch.seconds_since_heartbeat(path, started - 100) < 1
    beat = dispatch.heartbeat_path(path)
    os.utime(beat, (started - 50, started - 50))  # the last beat, 50 s ago
    assert 49 < dispatch.seconds_since_heartbeat(path, started - 100) < 60


def test_dispatch_defaults_to_local_and_pool_is_a_profile_setting(tmp_path: Path) -> None:
    smoke = load_profile("smoke")
    assert smoke.dispatch.mode == "local" and smoke.pool_deployment == "train-and-evaluate/gpu"
    path = tmp_path / "p.yaml"
    text = (Path(__file__).resolve().parents[1] / "configs" / "nightly-smoke.yaml").read_text()
    path.write_text(text + "dispatch: gpu-please\n")
    with pytest.raises(ValueError, match="dispatch"):
        load_profile(path)
    path.write_text(text + "dispatch: pool\nlost_after_seconds: 20\n")
    assert load_profile(path).dispatch.mode == "pool" and load_profile(path).lost_after_seconds == 20
    path.write_text(text + "dispatch: {mode: pool, pending_timeout: 15m, fallback: cpu}\n")
    assert load_profile(path).dispatch == DispatchPlan(mode="pool", pending_timeout=900.0, fallback="cpu")
    path.write_text(text + "dispatch: {mode: pool, pending_timeout: soon}\n")
    with pytest.raises(ValueError, match="pending_timeout"):
        load_profile(path)


def test_serve_without_a_server_says_the_temporary_api_runs_no_scheduler() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "simpair.flows.deployments", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode != 0
    assert "temporary local API runs no scheduler" in done.stderr and "make stack-up" in done.stderr


def test_stack_commands_without_a_stack(tmp_path: Path) -> None:
    ok, lines = local_stack.status(tmp_path)
    assert not ok and "no stack recorded" in lines[0]
    assert "no stack recorded" in local_stack.down(tmp_path)[0]
    with pytest.raises(local_stack.StackError, match="no stack recorded"):
        local_stack.start_worker(tmp_path, "gpu")


def test_stack_down_stops_a_recorded_process_group_and_skips_a_reused_pid(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, "
         "'-c', 'import time; time.sleep(120)']); time.sleep(120)"],
        start_new_session=True,
    )  # fmt: skip
    stack = local_stack.Stack(str(tmp_path), "http://127.0.0.1:9/api", "http://127.0.0.1:9", "")
    stack.processes = [
        local_stack.Proc("worker-gpu", sleeper.pid, str(tmp_path / "w.log"), ["prefect"]),
        local_stack.Proc("reused", os.getpid(), str(tmp_path / "x.log"), ["prefect"]),  # not a leader
    ]
    (tmp_path / "stack").mkdir()
    local_stack._write(stack, tmp_path / "stack")
    time.sleep(0.5)
    children = local_stack._descendants(sleeper.pid)
    assert children
    lines = local_stack.down(tmp_path)
    sleeper.wait(timeout=30)
    assert any("worker-gpu: stopped" in line for line in lines)
    assert any("reused: not running" in line for line in lines)  # this test's own PID survived
    assert not any(local_stack.alive(pid) for pid in children)
    env = (tmp_path / "stack" / "env").read_text()
    assert "export PREFECT_API_URL=http://127.0.0.1:9/api" in env and "MLFLOW_TRACKING_URI" in env


class _StandInWorker:
    """Plays the worker of a pool on the temporary API: each run the night dispatches (its name carries
    the night's id) gets the next script, a list of steps: a state type set on the run, or `result` /
    `error` (what a training run writes to its result path before it completes or fails)."""

    def __init__(self, deployment: str, night_id: str, scripts: list[list[str]]) -> None:
        self.deployment, self.night_id, self.scripts = deployment, night_id, scripts
        self.runs: list[object] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=contextvars.copy_context().run, args=(self._loop,), daemon=True
        )

    def __enter__(self) -> _StandInWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
        from prefect.client.schemas.sorting import FlowRunSort

        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name(self.deployment)
            seen: set[object] = set()
            while not self._stop.wait(0.1):
                runs = client.read_flow_runs(
                    deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                    sort=FlowRunSort.EXPECTED_START_TIME_ASC,
                    limit=200,
                )
                for run in runs:
                    if self.night_id[:8] in (run.name or "") and run.id not in seen and self.scripts:
                        seen.add(run.id)
                        self.runs.append(run)
                        self._play(client, run, self.scripts.pop(0))

    @staticmethod
    def _play(client: object, run: object, steps: list[str]) -> None:
        from prefect import states

        path = Path(run.parameters["result_path"])  # type: ignore[attr-defined]
        for step in steps:
            if step == "result":
                dispatch.write_result(path, _trained(Path(run.parameters["home"])))  # type: ignore[attr-defined]
            elif step == "error":  # a permanent error, as a stopped run may record on its way down
                dispatch.write_error(path, FileNotFoundError("no-such-backbone"))
            else:
                client.set_flow_run_state(run.id, getattr(states, step)(), force=True)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def pool_deployment(prefect_api: None) -> str:
    """`train-and-evaluate` deployed on a work pool of its own on the temporary API, with no worker."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.deployments.runner import EntrypointType
    from prefect.exceptions import ObjectAlreadyExists
    from prefect.workers.process import ProcessWorker

    from simpair.flows.nightly_retrain import train_and_evaluate

    with get_client(sync_client=True) as client, contextlib.suppress(ObjectAlreadyExists):
        template = ProcessWorker.get_default_base_job_template()
        client.create_work_pool(WorkPoolCreate(name="gpu-test", type="process", base_job_template=template))
    train_and_evaluate.to_deployment(
        name="gpu-test", work_pool_name="gpu-test", entrypoint_type=EntrypointType.MODULE_PATH
    ).apply()
    return "train-and-evaluate/gpu-test"


def _pool_plan(deployment: str, attempts: int, lost_after: float = 300.0, **dispatch_settings: object):
    profile = load_profile("smoke")
    return profile.model_validate(
        {
            **profile.model_dump(),
            "dispatch": {"mode": "pool", **dispatch_settings},
            "pool_deployment": deployment,
            "lost_after_seconds": lost_after,
            "retries": {"attempts": attempts, "delays_seconds": [0.0]},
        }
    )


def _state(run_id: object) -> tuple[str, str | None]:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run_id).state  # type: ignore[arg-type]
    return state.type.value, state.message


@pytest.fixture
def night_id(monkeypatch: pytest.MonkeyPatch) -> str:
    from simpair.ops import pool_dispatch

    monkeypatch.setattr(pool_dispatch, "POLL_SECONDS", 0.05)
    return uuid.uuid4().hex


@pytest.mark.timeout(90, func_only=True)  # the temporary API may take minutes to start
def test_a_run_no_worker_starts_is_cancelled_and_the_task_fails_naming_the_pool(
    tmp_path: Path, pool_deployment: str, night_id: str
) -> None:
    from simpair.ops.pool_dispatch import NoWorkerTookRun, train_on_pool

    plan = _pool_plan(pool_deployment, attempts=2, pending_timeout="1s")
    assert plan.dispatch.pending_timeout == 1.0 and load_profile("smoke").dispatch.pending_timeout == 900
    with _StandInWorker(pool_deployment, night_id, []):  # no worker: nothing takes the run
        started = time.monotonic()
        with pytest.raises(NoWorkerTookRun) as failure:
            train_on_pool(plan, "sts", tmp_path, night_id)
        waited = time.monotonic() - started
        time.sleep(0.3)
    message = str(failure.value)
    assert "no worker of work pool 'gpu-test' started flow run sts-" in message and "within 1 s" in message
    assert "\n" not in message and "prefect worker start --pool gpu-test" in message
    assert not failure.value.transient and 1 <= waited < 20  # not retried: another wait would not help
    (run,) = _runs(pool_deployment, night_id)
    assert _state(run.id)[0] == "CANCELLED"


@pytest.mark.timeout(90, func_only=True)  # the temporary API may take minutes to start
def test_with_fallback_cpu_a_task_no_worker_took_trains_here_and_the_night_says_so(
    tmp_path: Path, pool_deployment: str, night_id: str
) -> None:
    from simpair.ops.pool_dispatch import train_on_pool

    plan = _pool_plan(pool_deployment, attempts=2, pending_timeout=0.5, fallback="cpu")
    trained_here = []

    def here() -> Trained:
        trained_here.append(True)
        return _trained(tmp_path)

    done = train_on_pool(plan, "sts", tmp_path, night_id, run_here=here)
    assert done.trained == _trained(tmp_path) and trained_here == [True]
    assert (
        done.note and "cpu pool instead (dispatch.fallback: cpu)" in done.note and "'gpu-test'" in done.note
    )
    (run,) = _runs(pool_deployment, night_id)
    assert _state(run.id)[0] == "CANCELLED"


@pytest.mark.timeout(90, func_only=True)  # the temporary API may take minutes to start
def test_a_crashed_run_is_retried_whatever_error_it_recorded(
    tmp_path: Path, pool_deployment: str, night_id: str
) -> None:
    """A worker stopped by SIGTERM stops its training run, which may record the signal as a permanent
    error before the run is marked Crashed: the night retries it all the same."""
    from prefect.client.orchestration import get_client

    from simpair.ops.pool_dispatch import (
        CRASH_AUTOMATION,
        HEARTBEAT_SECONDS,
        SILENT_AFTER_SECONDS,
        WATCHED_TAG,
        ensure_crash_detection,
        train_on_pool,
    )

    plan = _pool_plan(pool_deployment, attempts=1)
    scripts = [["Running", "error", "Crashed"], ["Running", "result", "Completed"]]
    with _StandInWorker(pool_deployment, night_id, scripts) as pool:
        done = train_on_pool(plan, "sts", tmp_path, night_id)
        ensure_crash_detection()  # a second night on the same server adds no second automation
        assert done.trained == _trained(tmp_path) and done.note is None
    first, second = pool.runs
    assert _state(first.id)[0] == "CRASHED" and _state(second.id)[0] == "COMPLETED"
    # dispatched runs send Prefect heartbeats, and the server's automation crashes a silent one
    assert WATCHED_TAG in first.tags
    assert first.job_variables["env"]["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == str(HEARTBEAT_SECONDS)
    with get_client(sync_client=True) as client:
        (automation,) = client.read_automations_by_name(CRASH_AUTOMATION)
    trigger = automation.trigger
    assert trigger.posture == "Proactive" and trigger.within.total_seconds() == SILENT_AFTER_SECONDS
    assert trigger.after == {"prefect.flow-run.heartbeat", "prefect.flow-run.Running"}
    assert "prefect.flow-run.Completed" in trigger.expect
    assert automation.actions[0].type == "change-flow-run-state" and automation.actions[0].state == "CRASHED"


@pytest.mark.timeout(90, func_only=True)  # the temporary API may take minutes to start
def test_pool_runs_that_crash_are_retried_then_the_task_fails(
    tmp_path: Path, pool_deployment: str, night_id: str
) -> None:
    from simpair.ops.pool_dispatch import train_on_pool

    plan = _pool_plan(pool_deployment, attempts=2)
    scripts = [["Pending", "Crashed"]] * 3
    with (
        _StandInWorker(pool_deployment, night_id, scripts) as pool,
        pytest.raises(dispatch.PoolRunFailed, match="ended CRASHED") as failure,
    ):
        train_on_pool(plan, "sts", tmp_path, night_id)
    assert failure.value.transient and len(pool.runs) == 3  # 1 + 2 retries, then the task fails
    assert [r.parameters["result_path"].rsplit("/", 1)[1] for r in pool.runs] == [
        "sts-1.json",
        "sts-2.json",
        "sts-3.json",
    ]


@pytest.mark.timeout(90, func_only=True)  # the temporary API may take minutes to start
def test_a_permanent_failure_on_the_pool_is_not_retried(
    tmp_path: Path, pool_deployment: str, night_id: str
) -> None:
    from simpair.ops.pool_dispatch import train_on_pool

    plan = _pool_plan(pool_deployment, attempts=2)
    with _StandInWorker(pool_deployment, night_id, [["Running", "error", "Failed"]] * 3) as pool:
        with pytest.raises(dispatch.PoolRunFailed, match="no-such-backbone") as failure:
            train_on_pool(plan, "sts", tmp_path, night_id)
        time.sleep(0.3)
    assert not failure.value.transient and len(pool.runs) == 1


@pytest.mark.timeout(90, func_only=True)  # the temporary API may take minutes to start
def test_a_silent_running_run_is_marked_crashed_and_dispatched_again(
    tmp_path: Path, pool_deployment: str, night_id: str
) -> None:
    from simpair.ops.pool_dispatch import train_on_pool

    plan = _pool_plan(pool_deployment, attempts=1, lost_after=0.5)
    with _StandInWorker(pool_deployment, night_id, [["Running"], ["Running", "result", "Completed"]]) as pool:
        done = train_on_pool(plan, "sts", tmp_path, night_id)
    assert done.trained == _trained(tmp_path)
    state, message = _state(pool.runs[0].id)
    assert state == "CRASHED" and "no heartbeat" in (message or "")  # the lost run, marked by the night
    assert pool.runs[0].parameters["eval_sets"] == [["stsb", "test"]]
    assert pool.runs[0].parameters["home"] == str(tmp_path)


def _runs(deployment: str, night_id: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name(deployment)
        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep.id])),
            sort=FlowRunSort.EXPECTED_START_TIME_ASC,  # sent explicitly: this server rejects null
            limit=200,
        )
    return [r for r in runs if night_id[:8] in (r.name or "")]
