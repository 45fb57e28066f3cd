"""Tell someone when a night goes wrong: a Prefect automation that sends through a notification block.

The automation `simpair nightly: notify on failure` fires on every `nightly-retrain` or
`nightly-score` flow run that turns Failed, Crashed, TimedOut or Late (Late: Scheduled past its
start with no worker taking it, marked by the server's late-runs service after 15-20 s). The server
itself sends the message through a Prefect notification block, so it arrives whether or not the
flow run's process is still alive to report anything. Training runs on the `gpu` pool are left out:
the night retries them, and the night's own failure is what a person acts on.

Where it sends to, read at `python -m simpair.flows.deployments apply` (`make stack-up` runs it),
from the environment of that command first, else from the nightly profile's `notify:` section
(`notify: {webhook: URL}` or `notify: {block: TYPE/NAME}`, in the profile the nightly deployment runs):
- `SIMPAIR_NOTIFY_WEBHOOK=URL` / `notify.webhook`: a `CustomWebhookNotificationBlock` named
  `simpair-notify` POSTs `{"text": subject + body, "subject": ..., "body": ...}` to URL (Slack's,
  Mattermost's and most chat tools' incoming-webhook shape), so a Slack incoming-webhook URL works as it is;
- `SIMPAIR_NOTIFY_BLOCK=TYPE/NAME` / `notify.block`: an existing notification block (e.g.
  `slack-webhook/alerts`, `sendgrid-email/on-call`), created by the team in the UI or in Python;
- none of these: nothing is changed on the server and apply says notifications are off.

The message names the deployment, the run, the state and its reason on one line, for example:
    simpair: nightly-retrain/nightly Failed
    deployment: nightly-retrain/nightly
    run: dandelion-otter (0c1f...)
    state: Failed
    reason: Flow run encountered an exception: StackError: mlflow server not responding
"""

from __future__ import annotations

import os
from pathlib import Path

from prefect.automations import Automation, EventTrigger, SendNotification
from prefect.blocks.core import Block
from prefect.blocks.notifications import CustomWebhookNotificationBlock

from simpair.nightly.profile import NotifyPlan, load_profile

WEBHOOK_ENV = "SIMPAIR_NOTIFY_WEBHOOK"
BLOCK_ENV = "SIMPAIR_NOTIFY_BLOCK"
WEBHOOK_BLOCK_NAME = "simpair-notify"
AUTOMATION_NAME = "simpair nightly: notify on failure"
WATCHED_FLOWS = ("nightly-retrain", "nightly-score")
# Prefect emits `prefect.flow-run.<state name>`; TimedOut is a Failed state under its own name
WATCHED_STATES = ("Failed", "Crashed", "TimedOut", "Late")

SUBJECT = "simpair: {{ flow.name }}/{{ deployment.name or '-' }} {{ flow_run.state.name }}"
# One line per field; a Late run carries no message of its own: say which pool had no worker for it.
REASON = (
    "{% if flow_run.state.name == 'Late' %}"
    "no worker of pool {{ flow_run.work_pool_name or '-' }} started it"
    " (scheduled for {{ flow_run.expected_start_time }})"
    "{% else %}"
    "{{ ((flow_run.state.message or '').strip() or 'no message given').splitlines()[0] | truncate(300) }}"
    "{% endif %}"
)
BODY = "\n".join(
    [
        "deployment: {{ flow.name }}/{{ deployment.name or '- (started by hand, not deployed)' }}",
        "run: {{ flow_run.name }} ({{ flow_run.id }})",
        "state: {{ flow_run.state.name }}",
        f"reason: {REASON}",
        "ui: {{ flow_run|ui_url or '-' }}",
    ]
)


def webhook_block(url: str) -> CustomWebhookNotificationBlock:
    """A JSON POST whose `text` is the whole message (what Slack-style incoming webhooks show)."""
    return CustomWebhookNotificationBlock(
        name="simpair nightly",
        url=url,
        method="POST",
        json_data={"text": "{{subject}}\n{{body}}", "subject": "{{subject}}", "body": "{{body}}"},
        timeout=10,
    )


def failure_automation(block_document_id: object) -> Automation:
    """The automation itself: one notification per run that turns Failed, Crashed, TimedOut or Late."""
    return Automation(
        name=AUTOMATION_NAME,
        description="notify when a nightly-retrain or nightly-score run fails, crashes or is late",
        trigger=EventTrigger(
            expect={f"prefect.flow-run.{state}" for state in WATCHED_STATES},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": list(WATCHED_FLOWS)},
            for_each={"prefect.resource.id"},
            posture="Reactive",
            threshold=1,
        ),
        actions=[SendNotification(block_document_id=block_document_id, subject=SUBJECT, body=BODY)],
    )


def _target(environ: dict[str, str], profile: str | Path | None) -> tuple[str, str, str] | None:
    """("block" or "webhook", its value, where it was set): the environment first, then the profile."""
    for kind, name in (("block", BLOCK_ENV), ("webhook", WEBHOOK_ENV)):
        if value := environ.get(name, "").strip():
            return kind, value, name
    if profile is None:
        return None
    plan: NotifyPlan = load_profile(profile).notify
    if plan.block:
        return "block", plan.block, f"profile {profile} notify.block"
    if plan.webhook:
        return "webhook", plan.webhook, f"profile {profile} notify.webhook"
    return None


def _block_document_id(environ: dict[str, str], profile: str | Path | None) -> tuple[object, str] | None:
    """(block document id, what it is) from the environment or the profile; None when notifications
    are off."""
    target = _target(environ, profile)
    if target is None:
        return None
    kind, value, origin = target
    if kind == "block":
        try:
            block = Block.load(value)
        except ValueError as exc:
            raise SystemExit(f"{origin}={value}: no such notification block on the server ({exc})") from None
        if "notify" not in block.get_block_capabilities():
            raise SystemExit(f"{origin}={value}: block is not a notification block")
        return block._block_document_id, f"block {value} (from {origin})"
    if not value.startswith(("http://", "https://")):
        raise SystemExit(f"{origin}: expected an http(s) URL, got {value!r}")
    block_id = webhook_block(value).save(WEBHOOK_BLOCK_NAME, overwrite=True)
    return block_id, f"webhook (block custom-webhook/{WEBHOOK_BLOCK_NAME}, from {origin})"


def apply_notifications(environ: dict[str, str] | None = None, profile: str | Path | None = None) -> str:
    """Create or update the automation on the server of PREFECT_API_URL; one line saying what it did.
    The target comes from `environ` (default: this process's environment), else from `profile`'s
    `notify:` section (the nightly profile the deployment runs)."""
    found = _block_document_id(dict(os.environ if environ is None else environ), profile)
    if found is None:
        return (
            f"notifications: off (set {WEBHOOK_ENV}=URL or {BLOCK_ENV}=TYPE/NAME, or `notify:` in the "
            "nightly profile, and apply again; docs/nightly.md)"
        )
    block_id, what = found
    automation = failure_automation(block_id)
    try:
        existing = Automation.read(name=AUTOMATION_NAME)
    except ValueError:
        automation.create()
        verb = "created"
    else:
        automation.id = existing.id
        automation.update()
        verb = "updated"
    watched = f"{', '.join(WATCHED_STATES)} of {', '.join(WATCHED_FLOWS)}"
    return f"notifications: {verb} automation {AUTOMATION_NAME!r} ({watched}) -> {what}"
