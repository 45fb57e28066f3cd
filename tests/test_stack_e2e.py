"""The night as deployed: a real Prefect server, MLflow server and cpu/gpu workers (`simpair.local_stack`).

One story, against real processes only (no temporary API, no in-process flow): the stack starts
(`make stack-up`'s code), `nightly-retrain/nightly` is triggered through the server's REST API with
the smoke profile and `dispatch: pool`. The first training run on the `gpu` pool loses its worker
(the worker and its flow-run process are SIGKILLed, as when a machine dies); the night notices the
missing heartbeat, marks that run Crashed and dispatches it again, which a fresh `gpu` worker runs.
Then it checks, from the servers: every training run belonged to the gpu deployment and pool and was
executed by a gpu worker; exactly one version per model was registered on the MLflow *server*;
`nightly-score` was started by its trigger (the retrain run's Completed event) and wrote Parquet.
Everything started is stopped in a `finally`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpair import local_stack, settings

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NIGHT_TIMEOUT = 480.0


def _api(url: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One call to the Prefect server's REST API, retried like Prefect's own client on 429/502/503
    (the SQLite-backed server answers 503 while its database is busy)."""
    request = urllib.request.Request(
        f"{url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="GET" if body is None else "POST",
    )
    for attempt in range(10):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 502, 503) or attempt == 9:
                raise
            time.sleep(1 + attempt)


def _flow_runs(url: str, deployment_id: str) -> list[dict[str, Any]]:
    body = {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}, "sort": "EXPECTED_START_TIME_ASC"}
    return _api(url, "/flow_runs/filter", body)


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and everything below it (a machine going away, not a polite shutdown)."""
    for target in [*local_stack._descendants(pid), pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)


def _smoke_pool_profile(tmp_path: Path) -> Path:
    profile = yaml.safe_load((settings.PROJECT_ROOT / "configs" / "nightly-smoke.yaml").read_text())
    profile.update(dispatch="pool", lost_after_seconds=25)
    path = tmp_path / "nightly-smoke-pool.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def test_night_on_real_servers_trains_on_the_gpu_pool_survives_a_lost_worker_and_triggers_scoring(
    tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.monotonic()
    home = tmp_path / "home"
    monkeypatch.setenv("SIMPAIR_SOURCES", str(shared_data))
    # the smoke night's first paraphrase version may lose its gate (no champion): score the challenger
    monkeypatch.setenv("SIMPAIR_SCORE_MODEL", "simpair-paraphrase@challenger")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # an inbox for the triggered scoring run: held-out pairs of the ingested sources
    from simpair.ingest import run_ingest
    from simpair.scoring.sample import make_sample_inbox

    assert run_ingest(sources=shared_data, home=home).ok
    make_sample_inbox(home, home / "inbox", None, 40)
    profile = _smoke_pool_profile(tmp_path)

    stack = local_stack.up(home, ui=False, worker_poll_seconds=1)
    try:
        url = stack.prefect_url
        assert url.startswith("http://127.0.0.1:") and stack.mlflow_url.startswith("http://127.0.0.1:")
        night_dep = _api(url, "/deployments/name/nightly-retrain/nightly")
        gpu_dep = _api(url, "/deployments/name/train-and-evaluate/gpu")
        score_dep = _api(url, "/deployments/name/nightly-score/nightly")
        assert (night_dep["work_pool_name"], gpu_dep["work_pool_name"]) == ("cpu", "gpu")
        assert score_dep["parameters"]["model"] == "simpair-paraphrase@challenger"
        # the server's scheduler fills in the crons' next runs (it does not with SQLAlchemy 2.1)
        while not (scheduled := _flow_runs(url, night_dep["id"])):
            assert time.monotonic() - started < 300, "the scheduler created no run for the cron"
            time.sleep(1)
        assert scheduled[0]["state_type"] == "SCHEDULED"
        next_night = datetime.fromisoformat(scheduled[0]["expected_start_time"]).astimezone(UTC)
        assert (next_night.hour, next_night.minute) == (2, 0)  # cron 0 2 * * * UTC
        night = _api(
            url,
            f"/deployments/{night_dep['id']}/create_flow_run",
            {"parameters": {"profile": str(profile), "force": False}},
        )

        # lose the gpu worker (and its flow-run process) as soon as the first training run runs
        deadline = time.monotonic() + NIGHT_TIMEOUT
        gpu_worker = next(p for p in stack.processes if p.name == "worker-gpu")
        while not any(r["state_type"] == "RUNNING" for r in _flow_runs(url, gpu_dep["id"])):
            assert time.monotonic() < deadline, "no training run started on the gpu pool"
            assert _api(url, f"/flow_runs/{night['id']}")["state_type"] not in ("FAILED", "CRASHED")
            time.sleep(0.5)
        _kill_tree(gpu_worker.pid)
        replacement = local_stack.start_worker(home, "gpu", worker_poll_seconds=1)
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=stack.mlflow_url, registry_uri=stack.mlflow_url)
        while _flow_runs(url, gpu_dep["id"])[0]["state_type"] != "CRASHED":
            assert time.monotonic() < deadline, "the lost training run was never marked Crashed"
            time.sleep(1)
        assert client.search_registered_models() == []  # lost mid-training: nothing registered, no alias

        while (state := _api(url, f"/flow_runs/{night['id']}"))["state_type"] not in (
            "COMPLETED",
            "FAILED",
            "CRASHED",
            "CANCELLED",
        ):
            assert time.monotonic() < deadline, f"night still {state['state_type']} after {NIGHT_TIMEOUT} s"
            time.sleep(2)
        assert state["state_type"] == "COMPLETED", state["state"]["message"]
        assert state["work_pool_name"] == "cpu"

        trainings = _flow_runs(url, gpu_dep["id"])
        names = {r["name"].split("-")[0] + "-" + r["name"].rsplit("-", 1)[1]: r for r in trainings}
        assert names["paraphrase-1"]["state_type"] == "CRASHED"  # lost with its worker, marked by the night
        assert names["paraphrase-2"]["state_type"] == names["sts-1"]["state_type"] == "COMPLETED"
        assert {r["work_pool_name"] for r in trainings} == {"gpu"} and len(trainings) == 3
        replacement_log = Path(replacement.log).read_text()
        for key in ("paraphrase-2", "sts-1"):
            assert names[key]["id"] in replacement_log  # executed by the (new) gpu-pool worker

        for model in ("simpair-paraphrase", "simpair-sts"):
            versions = client.search_model_versions(f"name='{model}'")
            assert [v.version for v in versions] == ["1"]  # the lost attempt registered nothing
            assert client.get_registered_model(model).aliases["challenger"] == "1"

        while not [r for r in _flow_runs(url, score_dep["id"]) if r["state_type"] == "COMPLETED"]:
            runs = _flow_runs(url, score_dep["id"])
            assert not [r for r in runs if r["state_type"] in ("FAILED", "CRASHED")], runs
            assert time.monotonic() < deadline + 120, "nightly-score did not run after the night"
            time.sleep(2)
        score_run = next(r for r in _flow_runs(url, score_dep["id"]) if r["state_type"] == "COMPLETED")
        # started by the trigger's automation (the retrain run's Completed event), not by its cron
        assert score_run["created_by"]["type"] == "AUTOMATION"
        assert score_run["created_by"]["display_value"] == "nightly-score after nightly-retrain"
        scored = sorted((home / "scoring").glob("date=*/*.parquet"))
        assert len(scored) == 2, sorted(str(p) for p in (home / "scoring").rglob("*"))
    finally:
        local_stack.down(home)
        print(f"stack e2e wall time: {time.monotonic() - started:.0f} s")
    ok, lines = local_stack.status(home)
    assert not ok and all("DEAD" in line for line in lines if " pid " in line)
