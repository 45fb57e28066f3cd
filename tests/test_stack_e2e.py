"""The night as deployed, and operating it: one real stack (`simpair.ops.local_stack`) for both stories.

One stack (`make stack-up`'s code): a Prefect server with its scheduler, trigger, automation and
late-runs services, an MLflow server, a cpu and a gpu process worker, the deployments applied with
`SIMPAIR_NOTIFY_WEBHOOK` pointing at an HTTP receiver on 127.0.0.1 in this process. It is started
once for the module (a start costs about a minute of CPU on 2 cores) and the two stories run on it in
order, against real processes only (no temporary API, no in-process flow).

1. The night. The scheduler fills in the next 02:00 UTC run; then both crons are switched off, so a
   run crossing 02:00 or 06:00 UTC sees no run it did not make. The Prefect CLI's listing commands
   (`deployment ls`, `work-pool ls`, `flow-run ls`, `automation ls`) exit 0 and list what `apply`
   made: with fastapi 0.151-0.154 they fail with 422 on Prefect's `"limit": null`.
   `nightly-retrain/nightly` is triggered through the REST API with the smoke profile's paraphrase
   task and `dispatch: pool`. The gpu worker is stopped as `docker compose stop` stops it (SIGTERM, then
   SIGKILL for what is left after 10 s) while the first training runs: the run stops sending
   heartbeats and the server's automation (its silence window set to 45 s) marks it Crashed within
   90 s; the night retries it on a fresh `gpu` worker. Every training run belonged to the gpu
   deployment and pool and was executed by a gpu worker; exactly one version was
   registered on the MLflow *server*;
   `nightly-score` was started by its trigger (the retrain run's Completed event) and wrote Parquet.
   A second night with no gpu worker and a 10 s `dispatch.pending_timeout` cancels its training run,
   fails with one line naming the pool, notifies the receiver with that line and its report page
   (written on its way out), and leaves the per-home lock and the deployment's concurrency slot free.
   Then a scoring run of 300 MSRP test pairs whose texts are three times longer raises the monitor's
   drift alarm: the receiver gets it (statistic, value, threshold, run) with the path of the night's
   report page (the newest, the failed night's), which now shows that run's drift table.
2. Operating it. Every worker is SIGKILLed: `status` names them DEAD and exits 1. A
   `train-and-evaluate/gpu` run and a `nightly-score/nightly` run are set Failed through the REST API
   and a `nightly-retrain/nightly` run is scheduled now with no cpu worker, so the server marks it
   Late: the receiver gets one message for the score run and one for the night, each naming the
   deployment, the run, the state and a one-line reason, and none for the training run. `worker gpu`
   adds a numbered gpu worker (status counts the dead ones as replaced); `restart worker-cpu` and
   `restart mlflow` bring those back: status exits 0, with the same ports and an untouched env file.
Everything started is stopped when the module ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from mlflow import MlflowClient
from stack_helpers import prefect_api

from simpair import settings
from simpair.nightly.lock import nightly_lock
from simpair.ops import local_stack
from simpair.ops.notifications import AUTOMATION_NAME
from simpair.ops.pool_dispatch import CRASH_AUTOMATION, SILENT_ENV, crash_message

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NIGHT_TIMEOUT = 900.0  # an upper bound: about 3 min idle, over 8 min with the cores shared
# How often each worker asks the server for runs. Every poll is server work: two workers polling each
# second cost the SQLite-backed server about 8 s of CPU a minute (2.4 s a minute with none; 2026-11-26),
# one to two minutes of CPU over this module; every 3 s costs a third of that, a run waits 1.5 s longer.
POLL_SECONDS = 3
# The crash automation's silence window: Prefect's heartbeats come every 30 s, so 45 s leaves 15 s of
# slack for a machine loaded by the other test workers and crashes the stopped worker's run 10 s sooner
# than the default 55 s.
SILENT_SECONDS = 45
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
PREFECT = Path(sys.executable).with_name("prefect")
T = TypeVar("T")


class _Receiver(BaseHTTPRequestHandler):
    """Records every JSON body POSTed to it (what a chat tool's incoming webhook would get)."""

    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Receiver", (_Receiver,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler.received
    finally:
        server.shutdown()
        server.server_close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of the children it has reaped (a worker's flow runs)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return 0.0


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_data: Path, receiver: tuple[str, list[dict[str, Any]]]
) -> Iterator[local_stack.Stack]:
    """The stack both stories run on, with an ingested home and an inbox for the triggered scoring."""
    started = time.monotonic()
    home = tmp_path_factory.mktemp("stack") / "home"
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("SIMPAIR_SOURCES", str(shared_data))
        # the smoke night's first paraphrase version may lose its gate (no champion): score the challenger
        monkeypatch.setenv("SIMPAIR_SCORE_MODEL", "simpair-paraphrase@challenger")
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        from simpair.ingest import run_ingest
        from simpair.scoring.sample import make_sample_inbox

        assert run_ingest(sources=shared_data, home=home).ok
        make_sample_inbox(home, home / "inbox", None, 40)
        # a generous start-up limit: on 2 shared cores the servers and the apply may take minutes
        running = local_stack.up(
            home,
            ui=False,
            worker_poll_seconds=POLL_SECONDS,
            timeout=480,
            extra_env={
                "SIMPAIR_NOTIFY_WEBHOOK": receiver[0],
                SILENT_ENV: str(SILENT_SECONDS),
                "PREFECT_SERVER_SERVICES_LATE_RUNS_AFTER_SECONDS": "5",
                "PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS": "2",
            },
        )
        print(f"stack up after {time.monotonic() - started:.0f} s")
        try:
            yield running
        finally:
            recorded = local_stack.read_stack(home) or running
            cpu = ", ".join(f"{p.name} {_cpu_seconds(p.pid):.0f}" for p in recorded.processes)
            print(f"stack CPU seconds (live processes): {cpu}")
            local_stack.down(home)
            print(f"stack wall time: {time.monotonic() - started:.0f} s")
    ok, lines = local_stack.status(home)
    assert not ok and all("DEAD" in line for line in lines if " pid " in line)


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
    # the paraphrase task alone: every fault here is a training run's, and each run on a worker costs
    # about 25 s of CPU in its own process (the nightly tests cover both tasks on the temporary API)
    profile["tasks"] = {"paraphrase": profile["tasks"]["paraphrase"]}
    path = tmp_path / f"nightly-smoke-pool-{pending_timeout}.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _wait_for(read: Callable[[], T], done: Callable[[T], bool], limit: float, every: float = 1.0) -> T:
    """Poll `read()` until `done` says so or `limit` seconds pass; the last value read, for the caller
    to assert on (a limit that ends a wait, not a stopwatch: the machine is shared)."""
    deadline = time.monotonic() + limit
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(every)
    return value


def _final(url: str, run_id: str, deadline: float) -> dict[str, Any]:
    while (run := prefect_api(url, f"/flow_runs/{run_id}"))["state_type"] not in FINAL:
        assert time.monotonic() < deadline, f"flow run {run['name']} still {run['state_type']}"
        time.sleep(2)
    return run


def _prefect_cli(api_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `prefect` command, as a user types it (a wide terminal: one name per line)."""
    env = {**os.environ, "PREFECT_API_URL": api_url, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [str(PREFECT), *args], capture_output=True, text=True, env=env, timeout=180, check=False
    )


def _cells(table: str) -> set[str]:
    """Every cell of the tables rich printed (columns split on its box-drawing bar)."""
    return {cell.strip() for line in table.splitlines() for cell in line.split("│")} - {""}


def _switch_off_crons(url: str, *deployments: dict[str, Any]) -> None:
    """Deactivate each deployment's schedules: the server deletes their future auto-scheduled runs."""
    for deployment in deployments:
        for schedule in deployment["schedules"]:
            path = f"/deployments/{deployment['id']}/schedules/{schedule['id']}"
            prefect_api(url, path, {"active": False}, method="PATCH")
    for deployment in deployments:
        assert not [r for r in _flow_runs(url, deployment["id"]) if r.get("auto_scheduled")]


def test_night_on_real_servers_survives_a_stopped_gpu_worker_and_fails_clearly_without_one(
    stack: local_stack.Stack, receiver: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    started = time.monotonic()
    home = Path(stack.home)
    _, received = receiver
    url = stack.prefect_url
    assert url.startswith("http://127.0.0.1:") and stack.mlflow_url.startswith("http://127.0.0.1:")
    night_dep = prefect_api(url, "/deployments/name/nightly-retrain/nightly")
    gpu_dep = prefect_api(url, "/deployments/name/train-and-evaluate/gpu")
    score_dep = prefect_api(url, "/deployments/name/nightly-score/nightly")
    assert (night_dep["work_pool_name"], gpu_dep["work_pool_name"]) == ("cpu", "gpu")
    assert score_dep["parameters"]["model"] == "simpair-paraphrase@challenger"
    # the server's scheduler fills in the crons' next runs (it does not with SQLAlchemy 2.1); the limit
    # only ends the wait on a machine that never schedules, what is asserted is the run it made
    scheduled = _wait_for(lambda: _flow_runs(url, night_dep["id"]), bool, limit=600)
    assert scheduled, "the scheduler created no run for the cron"
    assert scheduled[0]["state_type"] == "SCHEDULED"
    next_night = datetime.fromisoformat(scheduled[0]["expected_start_time"]).astimezone(UTC)
    assert (next_night.hour, next_night.minute) == (2, 0)  # cron 0 2 * * * UTC
    _switch_off_crons(url, night_dep, score_dep)
    profile = _smoke_pool_profile(tmp_path)
    night = prefect_api(
        url,
        f"/deployments/{night_dep['id']}/create_flow_run",
        {"parameters": {"profile": str(profile), "force": False}},
    )
    # the CLI's list commands, while the night starts (each spends seconds importing Prefect)
    expected = {
        ("deployment", "ls"): {"nightly-retrain/nightly", "nightly-score/nightly", "train-and-evaluate/gpu"},
        ("work-pool", "ls"): {"cpu", "gpu"},
        ("flow-run", "ls"): {night["name"]},
        ("automation", "ls"): {AUTOMATION_NAME, CRASH_AUTOMATION, "nightly-score after nightly-retrain"},
    }
    cli_pool = ThreadPoolExecutor(max_workers=len(expected))
    cli_runs = {args: cli_pool.submit(_prefect_cli, url, *args) for args in expected}

    # stop the gpu worker politely (as `docker compose stop` does) while the first training runs
    deadline = time.monotonic() + NIGHT_TIMEOUT
    gpu_worker = next(p for p in stack.processes if p.name == "worker-gpu")
    # two server queries a poll, so once a second (a training run lasts far longer than that)
    while not any(r["state_type"] == "RUNNING" for r in _flow_runs(url, gpu_dep["id"])):
        assert time.monotonic() < deadline, "no training run started on the gpu pool"
        assert prefect_api(url, f"/flow_runs/{night['id']}")["state_type"] not in ("FAILED", "CRASHED")
        time.sleep(1)
    stopped = time.monotonic()
    _compose_stop(gpu_worker.pid)
    replacement = local_stack.start_worker(home, "gpu", worker_poll_seconds=POLL_SECONDS)
    client = MlflowClient(tracking_uri=stack.mlflow_url, registry_uri=stack.mlflow_url)
    # the wait ends at the Crashed state, or after a limit well under the night's own backstop (600 s),
    # so that a run crashed by the backstop could not pass: the state and its message are asserted
    first = _wait_for(
        lambda: _flow_runs(url, gpu_dep["id"])[0], lambda run: run["state_type"] == "CRASHED", limit=300
    )
    crashed_after = time.monotonic() - stopped
    assert first["state_type"] == "CRASHED", f"the stopped worker's run still {first['state_type']}"
    # marked by the server's heartbeat automation, with its message (the night's backstop has its own)
    assert prefect_api(url, f"/flow_runs/{first['id']}")["state"]["message"] == crash_message(SILENT_SECONDS)
    assert client.search_registered_models() == []  # lost mid-training: nothing registered, no alias

    failures = []
    for args, names in expected.items():
        result = cli_runs[args].result()
        if result.returncode != 0 or not names <= _cells(result.stdout):
            tail = (result.stderr.strip().splitlines() or [""])[-1][:400]
            missing = sorted(names - _cells(result.stdout))
            failures.append(f"prefect {' '.join(args)}: exit {result.returncode}, missing {missing}; {tail}")
    cli_pool.shutdown()
    assert not failures, "\n".join(failures)

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
    assert names["paraphrase-2"]["state_type"] == "COMPLETED"
    assert {r["work_pool_name"] for r in trainings} == {"gpu"} and len(trainings) == 2
    # executed by the (new) gpu-pool worker
    assert names["paraphrase-2"]["id"] in Path(replacement.log).read_text()

    versions = client.search_model_versions("name='simpair-paraphrase'")
    assert [v.version for v in versions] == ["1"]  # the lost attempt registered nothing
    assert client.get_registered_model("simpair-paraphrase").aliases["challenger"] == "1"
    assert [m.name for m in client.search_registered_models()] == ["simpair-paraphrase"]

    while not [r for r in _flow_runs(url, score_dep["id"]) if r["state_type"] == "COMPLETED"]:
        runs = _flow_runs(url, score_dep["id"])
        assert not [r for r in runs if r["state_type"] in ("FAILED", "CRASHED")], runs
        assert time.monotonic() < deadline + 120, "nightly-score did not run after the night"
        time.sleep(2)
    # the crons are off: the only scoring run is the one the trigger made
    (score_run,) = _flow_runs(url, score_dep["id"])
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
    with nightly_lock(home, 0):  # the per-home lock is free for the next night
        pass
    limit = f"/v2/concurrency_limits/{night_dep['global_concurrency_limit']['id']}"
    while prefect_api(url, limit)["active_slots"] != 0:  # and so is the deployment's one slot
        assert time.monotonic() < deadline + 260, "the failed night still holds its concurrency slot"
        time.sleep(1)
    # someone hears of it: the failure automation sent the night's one-line reason to the webhook
    while not (told := [m for m in received if stuck["id"] in m["body"]]):
        assert time.monotonic() < deadline + 320, f"no notification for the failed night: {received}"
        time.sleep(0.5)
    assert told[0]["subject"] == "simpair: nightly-retrain/nightly Failed"
    assert f"reason: {message.strip().splitlines()[0][:200]}" in told[0]["body"]
    assert not [m for m in received if night["id"] in m["body"] and "state: Failed" in m["body"]]
    # the failed night wrote its report page on its way out, and the message names it
    page = Path(told[0]["body"].split("\nreport: ", 1)[1].splitlines()[0])
    assert page.parent.name.endswith(stuck["id"][:8]) and "**failed**" in page.read_text()
    _drift_is_notified(url, home, score_dep, page, received, deadline + 480)
    story = time.monotonic() - started
    print(f"stopped worker's run Crashed after {crashed_after:.0f} s; night story {story:.0f} s")


def _drift_is_notified(
    url: str,
    home: Path,
    score_dep: dict[str, Any],
    page: Path,
    received: list[dict[str, Any]],
    deadline: float,
) -> None:
    """A batch three times longer than the traffic the model was gated on (300 pairs: over the
    monitor's `min_pairs`), scored by a `nightly-score/nightly` run: its alarm reaches the receiver
    through the `notify on drift` automation, naming the run and the night's report page."""
    import polars as pl

    from simpair.catalog import Catalog
    from simpair.scoring.sample import SAMPLE_COLUMNS

    pairs = Catalog(home).read_split("msrp", "test").select(SAMPLE_COLUMNS).head(300)
    longer = pairs.with_columns(
        pl.concat_str([pl.col(c)] * 3, separator=" ").alias(c) for c in ("text_a", "text_b")
    ).with_columns(pl.col("pair_id") + "-x3")
    longer.write_parquet(home / "inbox" / ".longer.parquet")  # dot-prefixed: the inbox lister skips it
    (home / "inbox" / ".longer.parquet").rename(home / "inbox" / "longer-texts.parquet")
    drifted = prefect_api(url, f"/deployments/{score_dep['id']}/create_flow_run", {})
    state = _final(url, drifted["id"], deadline)
    assert state["state_type"] == "COMPLETED", state["state"]["message"]
    told = _wait_for(lambda: [m for m in received if drifted["id"] in m["body"]], bool, limit=60, every=0.5)
    assert told, f"no drift notification for scoring run {drifted['name']}: {received}"
    message = told[0]
    assert message["subject"].startswith("simpair: drift alarm in nightly-score/nightly: "), message
    assert " against the " in message["subject"] and "alarms: " in message["body"]
    assert f"scoring run prefect-{drifted['id']} of simpair-paraphrase v1" in message["body"]
    # the report is the night's page (the newest begun in the last 24 h), now with this run's drift table
    assert f"\nreport: {page}\n" in message["body"]
    text = page.read_text()
    assert f"`prefect-{drifted['id']}`: simpair-paraphrase v1" in text and "**ALARM**" in text


def _run_later(url: str, deployment: dict[str, Any], **parameters: Any) -> dict[str, Any]:
    """A run scheduled an hour ahead: no worker takes it, and it is not Late."""
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    state = {"type": "SCHEDULED", "name": "Scheduled", "state_details": {"scheduled_time": later}}
    body = {"state": state, "parameters": parameters}
    return prefect_api(url, f"/deployments/{deployment['id']}/create_flow_run", body)


def _set_state(url: str, run: dict[str, Any], type_: str, name: str, message: str) -> None:
    body = {"state": {"type": type_, "name": name, "message": message}, "force": True}
    assert prefect_api(url, f"/flow_runs/{run['id']}/set_state", body)["status"] == "ACCEPT"


def _kill_tree(pid: int) -> None:
    for target in [*local_stack._descendants(pid), pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while local_stack.alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _status(home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = local_stack.main(["status", "--home", str(home)])
    return code, capsys.readouterr().out


def _line(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"{name} "))


def test_failed_and_late_nights_notify_and_dead_workers_are_seen_and_restarted(
    stack: local_stack.Stack,
    receiver: tuple[str, list[dict[str, Any]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    started = time.monotonic()
    _, received = receiver
    home = Path(stack.home)
    root = home / "stack"
    url = stack.prefect_url
    assert "notifications: created automation" in (root / "logs" / "apply.log").read_text()
    env_before, env_mtime = (root / "env").read_text(), (root / "env").stat().st_mtime_ns
    recorded = local_stack.read_stack(home)
    assert recorded is not None
    for proc in recorded.processes:
        if proc.name.startswith("worker-") and local_stack.alive(proc.pid):
            _kill_tree(proc.pid)
    code, out = _status(home, capsys)
    assert code == 1
    assert "DEAD" in _line(out, "worker-cpu") and "DEAD" in _line(out, "worker-gpu"), out

    night_dep = prefect_api(url, "/deployments/name/nightly-retrain/nightly")
    score_dep = prefect_api(url, "/deployments/name/nightly-score/nightly")
    gpu_dep = prefect_api(url, "/deployments/name/train-and-evaluate/gpu")
    training = _run_later(url, gpu_dep, task_name="paraphrase")
    _set_state(url, training, "FAILED", "Failed", "retried by the night")
    score = _run_later(url, score_dep)
    _set_state(url, score, "FAILED", "Failed", "ScoringError: inbox batch b1 unreadable\nTraceback ...")
    night = prefect_api(url, f"/deployments/{night_dep['id']}/create_flow_run", {})  # now: no cpu worker

    def about_these() -> list[dict[str, Any]]:
        return [m for m in received if any(r["id"] in m["body"] for r in (training, score, night))]

    # replaces the dead gpu workers
    added = local_stack.start_worker(home, "gpu", worker_poll_seconds=POLL_SECONDS)
    deadline = time.monotonic() + 60
    while len(about_these()) < 2:
        assert time.monotonic() < deadline, f"notifications after 60 s: {received}"
        time.sleep(0.5)
    _set_state(url, night, "CANCELLED", "Cancelled", "late test night")  # before a worker returns
    notified = about_these()
    by_deployment = {m["body"].splitlines()[0]: m for m in notified}
    assert len(notified) == 2 and set(by_deployment) == {
        "deployment: nightly-score/nightly",
        "deployment: nightly-retrain/nightly",
    }, notified
    score_msg = by_deployment["deployment: nightly-score/nightly"]
    assert score_msg["subject"] == "simpair: nightly-score/nightly Failed"
    assert f"run: {score['name']} ({score['id']})" in score_msg["body"]
    assert "state: Failed" in score_msg["body"]
    assert "reason: ScoringError: inbox batch b1 unreadable\n" in score_msg["body"]
    assert "Traceback" not in score_msg["body"]
    assert f"ui: {stack.ui_url}/runs/flow-run/{score['id']}" in score_msg["body"]
    assert score_msg["text"] == f"{score_msg['subject']}\n{score_msg['body']}"
    night_msg = by_deployment["deployment: nightly-retrain/nightly"]["body"]
    assert f"run: {night['name']} ({night['id']})" in night_msg
    assert "state: Late" in night_msg and "reason: no worker of pool cpu started it" in night_msg

    code, out = _status(home, capsys)
    assert code == 1 and "DEAD" in _line(out, "worker-cpu")
    assert f"dead, replaced by {added.name}" in _line(out, "worker-gpu"), out

    assert local_stack.main(["restart", "worker-cpu", "--home", str(home)]) == 0
    assert local_stack.main(["restart", "mlflow", "--home", str(home)]) == 0
    code, out = _status(home, capsys)
    assert code == 0, out
    assert "alive" in _line(out, "worker-cpu") and "alive" in _line(out, "mlflow-server")
    assert "cpu-local online" in _line(out, "pool cpu"), out
    after = local_stack.read_stack(home)
    assert (after.prefect_url, after.mlflow_url) == (stack.prefect_url, stack.mlflow_url)
    assert (root / "env").read_text() == env_before and (root / "env").stat().st_mtime_ns == env_mtime
    assert len(about_these()) == 2  # the cancelled night and the restarts notified nobody
    print(f"operations story {time.monotonic() - started:.0f} s")
