"""`dispatch: pool` and the local stack, without servers: result files, heartbeats, lost runs, refusals.

The real thing (servers, workers, a killed worker) is tests/test_stack_e2e.py; these check the
decisions it relies on in milliseconds: what a training run on the pool writes back through the
shared home, how the night tells a transient failure from a permanent one, when a silent run counts
as lost, that the profile setting defaults to `local`, and that `serve` and the stack commands say
what is wrong instead of running on a temporary API.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simpair import local_stack
from simpair.nightly import dispatch
from simpair.nightly.profile import load_profile
from simpair.nightly.summary import Trained


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
    assert smoke.dispatch == "local" and smoke.pool_deployment == "train-and-evaluate/gpu"
    path = tmp_path / "p.yaml"
    text = (Path(__file__).resolve().parents[1] / "configs" / "nightly-smoke.yaml").read_text()
    path.write_text(text + "dispatch: gpu-please\n")
    with pytest.raises(ValueError, match="dispatch"):
        load_profile(path)
    path.write_text(text + "dispatch: pool\nlost_after_seconds: 20\n")
    assert load_profile(path).dispatch == "pool" and load_profile(path).lost_after_seconds == 20


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


class _FakePool:
    """Stands in for the server: each dispatched run goes through the given states, one per poll."""

    def __init__(self, scripts: list[list[str]], on_dispatch=None) -> None:
        self.scripts, self.on_dispatch = scripts, on_dispatch
        self.runs: list[dict] = []
        self.forced: list[tuple[object, str]] = []

    def run_deployment(self, name: str, parameters: dict, **kwargs: object) -> object:
        from types import SimpleNamespace
        from uuid import uuid4

        run = SimpleNamespace(id=uuid4(), name=kwargs["flow_run_name"])
        self.runs.append({"run": run, "parameters": parameters, "states": list(self.scripts.pop(0))})
        if self.on_dispatch:
            self.on_dispatch(parameters)
        return run

    def get_client(self, sync_client: bool = True) -> object:
        import contextlib
        from types import SimpleNamespace

        from prefect import states

        pool = self

        class _Client:
            def read_flow_run(self, run_id: object) -> object:
                entry = next(r for r in pool.runs if r["run"].id == run_id)
                kind = entry["states"].pop(0) if len(entry["states"]) > 1 else entry["states"][0]
                return SimpleNamespace(state=getattr(states, kind)())

            def set_flow_run_state(self, run_id: object, state: object, force: bool = False) -> None:
                pool.forced.append((run_id, state.type.value))  # type: ignore[attr-defined]

        return contextlib.nullcontext(_Client())


def _pool_plan(tmp_path: Path, attempts: int, lost_after: float = 300.0):
    profile = load_profile("smoke")
    return profile.model_copy(
        update={
            "dispatch": "pool",
            "lost_after_seconds": lost_after,
            "retries": profile.retries.model_copy(update={"attempts": attempts, "delays_seconds": [0.0]}),
        }
    )


@pytest.fixture
def fake_pool(monkeypatch: pytest.MonkeyPatch):
    from simpair.flows import pool_dispatch

    monkeypatch.setattr(pool_dispatch, "POLL_SECONDS", 0.01)

    def install(pool: _FakePool) -> _FakePool:
        monkeypatch.setattr(pool_dispatch, "run_deployment", pool.run_deployment)
        monkeypatch.setattr(pool_dispatch, "get_client", pool.get_client)
        return pool

    return install


def test_pool_runs_that_crash_are_retried_then_the_task_fails(tmp_path: Path, fake_pool) -> None:
    from simpair.flows.pool_dispatch import train_on_pool

    plan = _pool_plan(tmp_path, attempts=2)
    pool = fake_pool(_FakePool([["Pending", "Crashed"]] * 3))
    with pytest.raises(dispatch.PoolRunFailed, match="ended CRASHED") as failure:
        train_on_pool(plan, "sts", plan.tasks["sts"], tmp_path, "night-1")
    assert failure.value.transient and len(pool.runs) == 3  # 1 + 2 retries, then the night fails
    assert [r["parameters"]["result_path"].rsplit("/", 1)[1] for r in pool.runs] == [
        "sts-1.json",
        "sts-2.json",
        "sts-3.json",
    ]


def test_a_permanent_failure_on_the_pool_is_not_retried(tmp_path: Path, fake_pool) -> None:
    from simpair.flows.pool_dispatch import train_on_pool

    plan = _pool_plan(tmp_path, attempts=2)

    def fails(parameters: dict) -> None:
        dispatch.write_error(Path(parameters["result_path"]), FileNotFoundError("no-such-backbone"))

    pool = fake_pool(_FakePool([["Running", "Failed"]] * 3, on_dispatch=fails))
    with pytest.raises(dispatch.PoolRunFailed, match="no-such-backbone") as failure:
        train_on_pool(plan, "sts", plan.tasks["sts"], tmp_path, "night-2")
    assert not failure.value.transient and len(pool.runs) == 1


def test_a_silent_running_run_is_marked_crashed_and_dispatched_again(tmp_path: Path, fake_pool) -> None:
    from simpair.flows.pool_dispatch import train_on_pool

    plan = _pool_plan(tmp_path, attempts=1, lost_after=0.2)
    calls = []

    def second_one_succeeds(parameters: dict) -> None:
        calls.append(parameters)
        if len(calls) == 2:
            dispatch.write_result(Path(parameters["result_path"]), _trained(tmp_path))

    pool = fake_pool(_FakePool([["Running"], ["Running", "Completed"]], on_dispatch=second_one_succeeds))
    trained = train_on_pool(plan, "sts", plan.tasks["sts"], tmp_path, "night-3")
    assert trained == _trained(tmp_path)
    assert pool.forced == [(pool.runs[0]["run"].id, "CRASHED")]  # the lost run, marked by the night
    assert calls[0]["eval_sets"] == [["stsb", "test"]] and calls[0]["home"] == str(tmp_path)
