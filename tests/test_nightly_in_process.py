"""One nightly DAG: `simpair nightly --no-prefect` runs the night in process, with no Prefect at all,
and registers, marks and gates what the `nightly-retrain` flow does on the same data (smoke profile,
tiny models: seconds of training per night)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient
from registry_helpers import one_torch_thread  # noqa: F401 - fixture

from simpair.nightly.night import night_in_process
from simpair.nightly.plan import read_state
from simpair.nightly.profile import Retries
from simpair.nightly.retry import RetryingInProcess
from simpair.nightly.summary import NightlyFailed

NAMES = ("simpair-paraphrase", "simpair-sts")


def _uri(home: Path) -> str:
    return f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"


def _registry(home: Path) -> dict[str, dict[str, object]]:
    """Per model: versions, aliases, gate decisions, and the dev and test metrics each version carries."""
    c = MlflowClient(tracking_uri=_uri(home), registry_uri=_uri(home))
    out: dict[str, dict[str, object]] = {}
    for name in NAMES:
        versions = sorted(c.search_model_versions(f"name='{name}'"), key=lambda v: int(v.version))
        out[name] = {
            "versions": [str(v.version) for v in versions],
            "aliases": {a: str(v) for a, v in (c.get_registered_model(name).aliases or {}).items()},
            "decisions": [v.tags.get("gate.decision") for v in versions],
            "metrics": [_quality(v.tags) for v in versions],
            "prefect": [v.tags.get("prefect.flow_run_id") for v in versions],
        }
    return out


def _quality(tags: dict[str, str]) -> dict[str, float]:
    return {k: round(float(v), 4) for k, v in tags.items() if k.startswith(("metric.dev", "metric.eval"))}


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("simpair", path=str(Path(sys.executable).parent)) or "simpair"
    env = {
        **os.environ,
        "SIMPAIR_HOME": str(home),
        "MLFLOW_TRACKING_URI": _uri(home),
        "PREFECT_API_URL": "http://127.0.0.1:9/api",  # nothing listens there: any Prefect call would fail
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.usefixtures("prefect_api", "one_torch_thread")
def test_no_prefect_night_registers_and_gates_as_the_flow_does(
    tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simpair.flows.launch import nightly

    flow_home, local_home = tmp_path / "flow", tmp_path / "local"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", _uri(flow_home))
    by_flow = nightly(profile="smoke", home=flow_home, sources=shared_data)

    ran = _cli(
        "nightly", "--no-prefect", "--profile", "smoke", "--sources", str(shared_data), home=local_home
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Nightly retrain (smoke): trained" in ran.stdout

    flow, local = _registry(flow_home), _registry(local_home)
    for name in NAMES:
        assert local[name]["versions"] == ["1"] and local[name]["aliases"]["challenger"] == "1"
        assert local[name]["prefect"] == [None] and flow[name]["prefect"] == [by_flow.flow_run_id]
        assert len(local[name]["metrics"][0]) >= 2  # type: ignore[index, arg-type]
        for key in ("versions", "aliases", "decisions", "metrics"):
            assert local[name][key] == flow[name][key], (name, key)
    state = read_state(local_home, "smoke")
    assert state is not None and state.versions == {"paraphrase": "1", "sts": "1"}
    assert state.decisions == {t.task: t.decision for t in by_flow.tasks}

    monkeypatch.setenv("MLFLOW_TRACKING_URI", _uri(local_home))
    again = night_in_process(profile="smoke", home=local_home, sources=shared_data)  # in this process
    assert again.status == "skipped" and "no source or training config changed" in again.message
    assert _registry(local_home) == local


def test_no_prefect_night_refuses_pool_dispatch_before_taking_the_lock(home: Path) -> None:
    with pytest.raises(NightlyFailed, match="dispatch: pool needs Prefect") as refused:
        night_in_process(profile="smoke", home=home, dispatch="pool")
    assert "\n" not in str(refused.value)
    assert list(home.iterdir()) == []  # no lock file, no ingest, no tracking store


def test_in_process_stages_retry_transient_faults_only() -> None:
    calls: list[str] = []

    def flaky(kind: str) -> str:
        calls.append(kind)
        if len(calls) == 1:
            raise (
                ConnectionError("tracking store reset the connection")
                if kind == "io"
                else ValueError("bad config")
            )
        return "done"

    runner = RetryingInProcess(Retries(attempts=2, delays_seconds=[0.0]), retried=[flaky])
    assert runner.run(flaky, kind="io") == "done" and calls == ["io", "io"]
    calls.clear()
    with pytest.raises(ValueError, match="bad config"):
        runner.run(flaky, kind="permanent")
    assert calls == ["permanent"]  # a permanent fault is not retried
    calls.clear()
    with pytest.raises(ConnectionError):
        RetryingInProcess(Retries(attempts=2, delays_seconds=[0.0]), retried=[]).run(flaky, kind="io")
    assert calls == ["io"]  # a stage not marked as retried runs once
