"""Operating the deployed stack without starting one: `restart`'s errors, and where the failure
notification goes (the environment of `deployments apply`, else the nightly profile's `notify:`).

The real stack (dead workers seen, replaced and restarted; notifications received from real failed
and late runs) is the second story of tests/test_stack_e2e.py, on the stack its night ran on.
"""

from __future__ import annotations

from pathlib import Path

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
