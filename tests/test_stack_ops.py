"""Operating the deployed stack: failure notifications, a dead worker seen, replaced and restarted.

One real stack (`simpair.local_stack.up`: Prefect server with its event, automation and late-run
services, MLflow server, a cpu and a gpu process worker, the deployments applied with
`SIMPAIR_NOTIFY_WEBHOOK` pointing at an HTTP receiver on 127.0.0.1 in this process). Then:
- both workers are SIGKILLed: `status` names them DEAD and exits 1;
- a `train-and-evaluate/gpu` run and a `nightly-score/nightly` run are set Failed through the REST
  API, and a `nightly-retrain/nightly` run is scheduled now with no cpu worker alive, so the server
  marks it Late: the receiver gets exactly one message for the score run and one for the night, each
  naming the deployment, the run, the state and a one-line reason, and none for the training run;
- `worker gpu` adds a numbered gpu worker: status counts the dead one as replaced; `restart
  worker-cpu` brings the cpu worker back (the server sees its heartbeat) and `restart mlflow` the
  MLflow server: status exits 0, with the same ports and an untouched env file.
No run executes a flow, so the file costs the stack's start (about 45 s) and a few worker starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from stack_helpers import prefect_api

from simpair import local_stack

pytestmark = [pytest.mark.slow, pytest.mark.integration]


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


@pytest.fixture
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
    tmp_path: Path,
    receiver: tuple[str, list[dict[str, Any]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    started = time.monotonic()
    hook, received = receiver
    home = tmp_path / "home"
    stack = local_stack.up(
        home,
        ui=False,
        worker_poll_seconds=1,
        timeout=420,  # ~45 s on 2 idle cores; room for a machine shared with other test runs
        extra_env={
            "SIMPAIR_NOTIFY_WEBHOOK": hook,
            "PREFECT_SERVER_SERVICES_LATE_RUNS_AFTER_SECONDS": "5",
            "PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS": "2",
        },
    )
    root = home / "stack"
    phases = [f"up {time.monotonic() - started:.0f} s"]
    try:
        url = stack.prefect_url
        assert "notifications: created automation" in (root / "logs" / "apply.log").read_text()
        env_before, env_mtime = (root / "env").read_text(), (root / "env").stat().st_mtime_ns
        workers = {p.name: p for p in stack.processes if p.name.startswith("worker-")}
        for proc in workers.values():
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

        local_stack.start_worker(home, "gpu", worker_poll_seconds=1)  # replaces the dead gpu worker
        deadline = time.monotonic() + 60
        while len(received) < 2:
            assert time.monotonic() < deadline, f"notifications after 60 s: {received}"
            time.sleep(0.5)
        _set_state(url, night, "CANCELLED", "Cancelled", "late test night")  # before a worker returns
        phases.append(f"notified {time.monotonic() - started:.0f} s")
        by_deployment = {m["body"].splitlines()[0]: m for m in received}
        assert len(received) == 2 and set(by_deployment) == {
            "deployment: nightly-score/nightly",
            "deployment: nightly-retrain/nightly",
        }, received
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
        assert "dead, replaced by worker-gpu-2" in _line(out, "worker-gpu"), out

        assert local_stack.main(["restart", "worker-cpu", "--home", str(home)]) == 0
        assert local_stack.main(["restart", "mlflow", "--home", str(home)]) == 0
        phases.append(f"restarted {time.monotonic() - started:.0f} s")
        code, out = _status(home, capsys)
        assert code == 0, out
        assert "alive" in _line(out, "worker-cpu") and "alive" in _line(out, "mlflow-server")
        assert "cpu-local online" in _line(out, "pool cpu"), out
        after = local_stack.read_stack(home)
        assert (after.prefect_url, after.mlflow_url) == (stack.prefect_url, stack.mlflow_url)
        assert (root / "env").read_text() == env_before and (root / "env").stat().st_mtime_ns == env_mtime
        assert len(received) == 2  # the cancelled night and the restarts notified nobody
    finally:
        local_stack.down(home)
        print(f"stack ops wall time: {time.monotonic() - started:.0f} s ({', '.join(phases)})")
    ok, lines = local_stack.status(home)
    assert not ok and all("DEAD" in line for line in lines if " pid " in line)


def test_restart_names_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(local_stack.StackError, match="no stack recorded"):
        local_stack.restart(tmp_path, "worker-gpu")
    with pytest.raises(local_stack.StackError, match="unknown service 'gpu'.*worker-gpu"):
        local_stack.restart(tmp_path, "gpu")
    with pytest.raises(SystemExit):
        local_stack.main(["restart", "--home", str(tmp_path)])
    assert "restart needs a service: prefect, mlflow, worker-cpu, worker-gpu" in capsys.readouterr().err
    assert local_stack.main(["restart", "mlflow", "--home", str(tmp_path)]) == 1
    assert "stack restart failed: no stack recorded" in capsys.readouterr().err


def test_apply_notifications_is_off_without_a_target_and_updates_one_automation(prefect_api: None) -> None:
    """On the temporary API: no variable, no change; a saved block by name; applied twice, one automation."""
    from prefect.automations import Automation
    from prefect.blocks.notifications import SlackWebhook

    from simpair.flows import notifications

    assert notifications.apply_notifications({}).startswith("notifications: off (set SIMPAIR_NOTIFY_WEBHOOK")
    with pytest.raises(ValueError):
        Automation.read(name=notifications.AUTOMATION_NAME)
    with pytest.raises(SystemExit, match="slack-webhook/nightly-alerts: no such notification block"):
        notifications.apply_notifications({"SIMPAIR_NOTIFY_BLOCK": "slack-webhook/nightly-alerts"})

    block_id = SlackWebhook(url="https://hooks.slack.com/services/T0/B0/x").save("nightly-alerts")
    line = notifications.apply_notifications({"SIMPAIR_NOTIFY_BLOCK": "slack-webhook/nightly-alerts"})
    assert (
        line.startswith("notifications: created automation") and "block slack-webhook/nightly-alerts" in line
    )
    line = notifications.apply_notifications({"SIMPAIR_NOTIFY_WEBHOOK": "http://127.0.0.1:9/hook"})
    assert line.startswith("notifications: updated automation")
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        automations = client.read_automations_by_name(notifications.AUTOMATION_NAME)
    assert len(automations) == 1
    (action,) = automations[0].actions
    assert action.block_document_id != block_id  # now the webhook block `simpair-notify`
    assert automations[0].trigger.expect == {
        "prefect.flow-run.Failed",
        "prefect.flow-run.Crashed",
        "prefect.flow-run.TimedOut",
        "prefect.flow-run.Late",
    }
