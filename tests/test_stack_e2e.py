"""The night as deployed: a real Prefect server, MLflow server and cpu/gpu workers (`simpair.local_stack`).

One story, against real processes only (no temporary API, no in-process flow): the stack starts
(`make stack-up`'s code), `nightly-retrain/nightly` is triggered through the server's REST API with
the smoke profile and `dispatch: pool`. The gpu worker is stopped as `docker compose stop` stops it
(SIGTERM, then SIGKILL for what is left after 10 s) while the first training run runs: the run stops
sending Prefect heartbeats and the server's automation marks it Crashed within a minute; the night
retries it, and a fresh `gpu` worker runs it. Then it checks, from the servers: every training run
belonged to the gpu deployment and pool and was executed by a gpu worker; exactly one version per
model was registered on the MLflow *server*; `nightly-score` was started by its trigger (the retrain
run's Completed event) and wrote Parquet. Meanwhile a second night runs with no gpu worker at all and
a 10 s `dispatch.pending_timeout`: it cancels its training run, fails with one line naming the pool,
and leaves the per-home lock and the deployment's concurrency slot free.
Everything started is stopped in a `finally`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from stack_helpers import prefect_api

from simpair import local_stack, settings

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NIGHT_TIMEOUT = 480.0
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def _flow_runs(url: str, deployment_id: str) -> list[dict[str, Any]]:
    body = {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}, "sort": "EXPECTED_START_TIME_ASC"}
    return prefect_api(url, "/flow_runs/filter", body)


def _compose_stop(pid: int, grace: float = 10.0) -> None:
    """Stop a worker as `docker compose stop` does: SIGTERM to it alone, SIGKILL for what is left of
    it and its children after `grace` seconds (the container's end)."""
    tree = [*local_stack._descendants(pid), pid]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(local_stack.alive(p) for p in tree):
        time.sleep(0.2)
    for target in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)


def _smoke_pool_profile(tmp_path: Path, pending_timeout: str = "15m") -> Path:
    profile = yaml.safe_load((settings.PROJECT_ROOT / "configs" / "nightly-smoke.yaml").read_text())
    # the night's own backstop for silent runs is far off: a stopped worker's run is crashed by Prefect
    profile.update(dispatch={"mode": "pool", "pending_timeout": pending_timeout}, lost_after_seconds=600)
    path = tmp_path / f"nightly-smoke-pool-{pending_timeout}.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _final(url: str, run_id: str, deadline: float) -> dict[str, Any]:
    while (run := prefect_api(url, f"/flow_runs/{run_id}"))["state_type"] not in FINAL:
        assert time.monotonic() < deadline, f"flow run {run['name']} still {run['state_type']}"
        time.sleep(2)
    return run


def test_night_on_real_servers_survives_a_stopped_gpu_worker_and_fails_clearly_without_one(
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

    # a generous start-up limit: on 2 shared cores the servers and the apply may take minutes
    stack = local_stack.up(home, ui=False, worker_poll_seconds=1, timeout=480)
    try:
        url = stack.prefect_url
        assert url.startswith("http://127.0.0.1:") and stack.mlflow_url.startswith("http://127.0.0.1:")
        night_dep = prefect_api(url, "/deployments/name/nightly-retrain/nightly")
        gpu_dep = prefect_api(url, "/deployments/name/train-and-evaluate/gpu")
        score_dep = prefect_api(url, "/deployments/name/nightly-score/nightly")
        assert (night_dep["work_pool_name"], gpu_dep["work_pool_name"]) == ("cpu", "gpu")
        assert score_dep["parameters"]["model"] == "simpair-paraphrase@challenger"
        # the server's scheduler fills in the crons' next runs (it does not with SQLAlchemy 2.1)
        while not (scheduled := _flow_runs(url, night_dep["id"])):
            assert time.monotonic() - started < 300, "the scheduler created no run for the cron"
            time.sleep(1)
        assert scheduled[0]["state_type"] == "SCHEDULED"
        next_night = datetime.fromisoformat(scheduled[0]["expected_start_time"]).astimezone(UTC)
        assert (next_night.hour, next_night.minute) == (2, 0)  # cron 0 2 * * * UTC
        night = prefect_api(
            url,
            f"/deployments/{night_dep['id']}/create_flow_run",
            {"parameters": {"profile": str(profile), "force": False}},
        )

        # stop the gpu worker politely (as `docker compose stop` does) while the first training runs
        deadline = time.monotonic() + NIGHT_TIMEOUT
        gpu_worker = next(p for p in stack.processes if p.name == "worker-gpu")
        while not any(r["state_type"] == "RUNNING" for r in _flow_runs(url, gpu_dep["id"])):
            assert time.monotonic() < deadline, "no training run started on the gpu pool"
            assert prefect_api(url, f"/flow_runs/{night['id']}")["state_type"] not in ("FAILED", "CRASHED")
            time.sleep(0.5)
        stopped = time.monotonic()
        _compose_stop(gpu_worker.pid)
        replacement = local_stack.start_worker(home, "gpu", worker_poll_seconds=1)
        from mlflow import MlflowClient

        from simpair.flows.pool_dispatch import CRASH_MESSAGE

        client = MlflowClient(tracking_uri=stack.mlflow_url, registry_uri=stack.mlflow_url)
        while (first := _flow_runs(url, gpu_dep["id"])[0])["state_type"] != "CRASHED":
            assert time.monotonic() - stopped < 90, f"the stopped worker's run still {first['state_type']}"
            time.sleep(1)
        crashed_after = time.monotonic() - stopped
        # marked by the server's heartbeat automation (the night's own backstop waits 600 s)
        assert prefect_api(url, f"/flow_runs/{first['id']}")["state"]["message"] == CRASH_MESSAGE
        assert client.search_registered_models() == []  # lost mid-training: nothing registered, no alias

        state = _final(url, night["id"], deadline)
        assert state["state_type"] == "COMPLETED", state["state"]["message"]
        assert state["work_pool_name"] == "cpu"
        # a second night with no gpu worker at all: it gives up after its pending_timeout
        local_stack.stop_process(replacement)
        short = _smoke_pool_profile(tmp_path, pending_timeout="10s")
        stuck = prefect_api(
            url,
            f"/deployments/{night_dep['id']}/create_flow_run",
            {"parameters": {"profile": str(short), "force": True}},
        )

        trainings = [r for r in _flow_runs(url, gpu_dep["id"]) if night["id"][:8] in r["name"]]
        names = {r["name"].split("-")[0] + "-" + r["name"].rsplit("-", 1)[1]: r for r in trainings}
        assert names["paraphrase-1"]["state_type"] == "CRASHED"  # stopped with its worker
        assert names["paraphrase-2"]["state_type"] == names["sts-1"]["state_type"] == "COMPLETED"
        assert {r["work_pool_name"] for r in trainings} == {"gpu"} and len(trainings) == 3
        replacement_log = Path(replacement.log).read_text()
        for key in ("paraphrase-2", "sts-1"):
            assert names[key]["id"] in replacement_log  # executed by the (new) gpu-pool worker

        for model in ("simpair-paraphrase", "simpair-sts"):
            versions = client.search_model_versions(f"name='{model}'")
            assert [v.version for v in versions] == ["1"]  # the lost attempt registered nothing
            assert client.get_registered_model(model).aliases["challenger"] == "1"

        def triggered_scoring() -> list[dict[str, Any]]:
            # The deployment's own 06:00 UTC cron may fire while the test runs (before any champion
            # exists, so that run fails): only runs the trigger created count here.
            return [r for r in _flow_runs(url, score_dep["id"]) if not r.get("auto_scheduled")]

        while not [r for r in triggered_scoring() if r["state_type"] == "COMPLETED"]:
            runs = triggered_scoring()
            assert not [r for r in runs if r["state_type"] in ("FAILED", "CRASHED")], runs
            assert time.monotonic() < deadline + 120, "nightly-score did not run after the night"
            time.sleep(2)
        score_run = next(r for r in triggered_scoring() if r["state_type"] == "COMPLETED")
        # started by the trigger's automation (the retrain run's Completed event), not by its cron
        assert score_run["created_by"]["type"] == "AUTOMATION"
        assert score_run["created_by"]["display_value"] == "nightly-score after nightly-retrain"
        scored = sorted((home / "scoring").glob("date=*/*.parquet"))
        assert len(scored) == 2, sorted(str(p) for p in (home / "scoring").rglob("*"))

        failed = _final(url, stuck["id"], deadline + 240)
        message = failed["state"]["message"] or ""
        assert failed["state_type"] == "FAILED", message
        assert "no worker of work pool 'gpu' started flow run paraphrase-" in message, message
        assert "within 10 s" in message and "\n" not in message.strip()
        (waiting,) = [r for r in _flow_runs(url, gpu_dep["id"]) if stuck["id"][:8] in r["name"]]
        assert waiting["state_type"] == "CANCELLED"
        from simpair.nightly.lock import nightly_lock

        with nightly_lock(home, 0):  # the per-home lock is free for the next night
            pass
        limit = f"/v2/concurrency_limits/{night_dep['global_concurrency_limit']['id']}"
        while prefect_api(url, limit)["active_slots"] != 0:  # and so is the deployment's one slot
            assert time.monotonic() < deadline + 260, "the failed night still holds its concurrency slot"
            time.sleep(1)
        print(f"stopped worker's run Crashed after {crashed_after:.0f} s")
    finally:
        local_stack.down(home)
        print(f"stack e2e wall time: {time.monotonic() - started:.0f} s")
    ok, lines = local_stack.status(home)
    assert not ok and all("DEAD" in line for line in lines if " pid " in line)
