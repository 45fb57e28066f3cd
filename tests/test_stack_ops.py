"""Operating the deployed stack without starting one: `restart`'s errors, where the failure and drift
notifications go (the environment of `deployments apply`, else the nightly profile's `notify:`), and a
drift alarm on its way from a flow run's event through the server's automation to a webhook.

The real stack (dead workers seen, replaced and restarted; notifications received from real failed
and late runs) is the second story of tests/test_stack_e2e.py, on the stack its night ran on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpair import settings
from simpair.ops import local_stack


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

    from simpair.ops import notifications

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
    # the drift automation beside it, one too, sending to the same block
    with get_client(sync_client=True) as client:
        (drift,) = client.read_automations_by_name(notifications.ALARM_AUTOMATION)
    assert drift.trigger.expect == {notifications.ALARM_EVENT}
    assert drift.actions[0].block_document_id == action.block_document_id


def _notify_profile(tmp_path: Path, notify: dict[str, str]) -> Path:
    profile = yaml.safe_load((settings.PROJECT_ROOT / "configs" / "nightly-smoke.yaml").read_text())
    path = tmp_path / f"notify-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump({**profile, "notify": notify}))
    return path


def _action_target(name: str) -> tuple[object, dict]:
    """(block document id, its data) of the failure automation's one action."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        (automation,) = client.read_automations_by_name(name)
        (action,) = automation.actions
        document = client.read_block_document(action.block_document_id, include_secrets=True)
    return action.block_document_id, document.data


def test_notification_target_comes_from_the_profile_and_the_environment_wins(
    prefect_api: None, tmp_path: Path
) -> None:
    """`notify: {webhook: URL}` in the profile the night runs makes the automation's webhook block;
    SIMPAIR_NOTIFY_WEBHOOK in apply's environment overrides it; `notify: {block: ...}` names a saved block."""
    from prefect.blocks.notifications import SlackWebhook

    from simpair.ops import notifications

    from_profile = _notify_profile(tmp_path, {"webhook": "http://127.0.0.1:9/from-profile"})
    line = notifications.apply_notifications({}, profile=from_profile)
    assert f"from profile {from_profile} notify.webhook" in line, line
    _, data = _action_target(notifications.AUTOMATION_NAME)
    assert data["url"] == "http://127.0.0.1:9/from-profile"

    line = notifications.apply_notifications(
        {"SIMPAIR_NOTIFY_WEBHOOK": "http://127.0.0.1:9/from-env"}, profile=from_profile
    )
    assert "from SIMPAIR_NOTIFY_WEBHOOK" in line, line
    assert _action_target(notifications.AUTOMATION_NAME)[1]["url"] == "http://127.0.0.1:9/from-env"

    block_id = SlackWebhook(url="https://hooks.slack.com/services/T0/B0/p").save("profile-alerts")
    by_block = _notify_profile(tmp_path, {"block": "slack-webhook/profile-alerts"})
    line = notifications.apply_notifications({"SIMPAIR_NOTIFY_WEBHOOK": " "}, profile=by_block)
    assert "block slack-webhook/profile-alerts" in line, line
    assert _action_target(notifications.AUTOMATION_NAME)[0] == block_id

    from simpair.nightly.profile import load_profile

    bad_url = r"(?s)notify\.webhook.*expected an http\(s\) URL, got 'hooks.example'"
    with pytest.raises(ValueError, match=bad_url):
        load_profile(_notify_profile(tmp_path, {"webhook": "hooks.example"}))


def test_compose_passes_the_notification_target_to_apply() -> None:
    """The shared env block of infra/docker-compose.yaml (the `deploy` service's environment) carries
    both variables through from the shell or `.env`, empty when unset (then the profile decides)."""
    compose = yaml.safe_load((settings.PROJECT_ROOT / "infra" / "docker-compose.yaml").read_text())
    env = compose["x-simpair-env"]
    assert env["SIMPAIR_NOTIFY_WEBHOOK"] == "${SIMPAIR_NOTIFY_WEBHOOK:-}"
    assert env["SIMPAIR_NOTIFY_BLOCK"] == "${SIMPAIR_NOTIFY_BLOCK:-}"
    assert compose["services"]["deploy"]["environment"] == env


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An HTTP receiver on 127.0.0.1 that records every JSON body POSTed to it (a chat webhook)."""
    received: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            received.append(json.loads(self.rfile.read(int(self.headers.get("content-length", 0)))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()


def test_a_drift_alarm_reaches_the_webhook_from_the_scoring_flow_run(
    prefect_api: None, tmp_path: Path, receiver: tuple[str, list[dict[str, Any]]]
) -> None:
    """A `nightly-score` run whose monitor alarmed emits `simpair.monitor.alarm`; the server's automation
    `notify on drift` sends the statistic, its value and threshold, the run and the report's path. A
    quiet run, and a run outside any flow (in process), emit nothing."""
    from prefect import flow
    from prefect.automations import Automation

    from simpair.monitoring.drift import DriftReport, DriftRow
    from simpair.nightly.report import ScoredRun
    from simpair.ops import notifications

    url, received = receiver
    assert f"{notifications.ALARM_AUTOMATION!r}" in notifications.apply_notifications(
        {"SIMPAIR_NOTIFY_WEBHOOK": url}
    )

    def scored(run_id: str, psi: float) -> ScoredRun:
        rows = [DriftRow(statistic="tokens", test="psi", value=psi, threshold=0.25, against="reference",
                         alarm=psi > 0.25)]  # fmt: skip
        monitor = tmp_path / run_id / "monitor.json"
        monitor.parent.mkdir()
        monitor.write_text(
            DriftReport(run_id=run_id, model="simpair-paraphrase", version="3", rows=rows).to_json()
        )
        fields = {"run_id": run_id, "model_name": "simpair-paraphrase", "model_version": "3"}
        return ScoredRun.from_summary({**fields, "monitor": str(monitor)})

    drifted, quiet = scored("prefect-drifted", 2.31), scored("prefect-quiet", 0.01)
    report = str(tmp_path / "reports" / "2026-11-29-0c1f2a3b" / "night.md")

    @flow(name="nightly-score")
    def scoring() -> tuple[bool, bool]:
        return notifications.emit_alarm(drifted, report), notifications.emit_alarm(quiet, report)

    assert notifications.emit_alarm(drifted, report) is False  # no flow run: the caller prints it
    try:
        assert scoring() == (True, False)
        deadline = time.monotonic() + 60
        while not received and time.monotonic() < deadline:
            time.sleep(0.2)
        (message,) = received
        first = "tokens psi 2.31 > 0.25 against the reference"
        assert message["subject"] == f"simpair: drift alarm in nightly-score/-: {first}"
        model, run, alarms = message["body"].splitlines()[:3]
        assert (model, alarms) == ("model: simpair-paraphrase v3", "alarms: 1")
        assert run.startswith("run: ") and run.endswith(", scoring run prefect-drifted")
        assert (
            f"drift alarm: {first}; scoring run prefect-drifted of simpair-paraphrase v3" in message["body"]
        )
        assert f"report: {report}" in message["body"]
        time.sleep(1)
        assert len(received) == 1  # the quiet run told nobody
    finally:  # this API is the session's: leave it without automations, as the other tests expect
        for name in (notifications.AUTOMATION_NAME, notifications.ALARM_AUTOMATION):
            Automation.read(name=name).delete()


def test_a_failed_night_leaves_its_report_page_and_the_notification_names_it(
    prefect_api: None,
    tmp_path: Path,
    receiver: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A `nightly-retrain` run that fails writes its report page (status failed, the error) on its
    way out, and the failure message gives that page's path: apply knows the home the workers share."""
    from prefect import flow, runtime
    from prefect.automations import Automation
    from prefect.client.orchestration import get_client
    from prefect.states import Failed, Scheduled
    from prefect.types._datetime import DateTime

    from simpair.nightly.report import page_on_failure
    from simpair.nightly.summary import NightlyFailed
    from simpair.ops import notifications
    from simpair.stages import InProcess

    home = tmp_path / "home"
    monkeypatch.setenv("SIMPAIR_HOME", str(home))
    url, received = receiver
    notifications.apply_notifications({"SIMPAIR_NOTIFY_WEBHOOK": url})
    error = "nightly (smoke) failed while training 'sts' from smoke-sts.yaml: OSError: no-such-backbone"

    @flow(name="nightly-retrain")
    def night() -> None:
        with page_on_failure(InProcess(), home, "smoke", str(runtime.flow_run.id)):
            raise NightlyFailed(error)

    try:
        state = night(return_state=True)
        assert state.is_failed()
        run_id = str(state.state_details.flow_run_id)
        deadline = time.monotonic() + 60
        while not (told := [m for m in received if run_id in m["body"]]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert told, received
        body = told[0]["body"]
        assert f"reason: Flow run encountered an exception: NightlyFailed: {error}" in body
        page = Path(body.split("\nreport: ", 1)[1].splitlines()[0])
        assert page.parent.name.endswith(f"-{run_id[:8]}") and page.parent.parent == home / "reports"
        text = page.read_text()
        assert "Nightly retrain (smoke): **failed**." in text and error in text

        # a night set Failed before it ever started wrote no page: its message has no report line
        with get_client(sync_client=True) as client:
            never = client.create_flow_run(
                night, state=Scheduled(scheduled_time=DateTime.now("UTC").add(hours=1))
            )
            client.set_flow_run_state(never.id, Failed(message="stopped before it started"), force=True)
        deadline = time.monotonic() + 60
        while (
            not (told := [m for m in received if str(never.id) in m["body"]]) and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert told and "reason: stopped before it started" in told[0]["body"], received
        assert "report:" not in told[0]["body"]
    finally:
        for name in (notifications.AUTOMATION_NAME, notifications.ALARM_AUTOMATION):
            Automation.read(name=name).delete()
