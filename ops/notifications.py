"""Tell someone when a night goes wrong: Prefect automations that send through a notification block.

Two automations, one target:
- `simpair nightly: notify on failure`, on a flow run's state (below);
- `simpair nightly: notify on drift`, on the event `simpair.monitor.alarm` that a `nightly-score` run
  emits (`emit_alarm`, called by the flow) when its traffic moved past a threshold of the monitor:
  the message names each alarmed statistic with its value, threshold and reference, the model
  version, the flow run and scoring run, and the night's report page (`simpair.nightly.report`).

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

The message names the deployment, the run, the state and its reason on one line (and a failed
night's report page, in the home `apply` was run with: the workers' `SIMPAIR_HOME`), for example:
    simpair: nightly-retrain/nightly Failed
    deployment: nightly-retrain/nightly
    run: dandelion-otter (0c1f...)
    state: Failed
    reason: Flow run encountered an exception: StackError: mlflow server not responding

and a drift alarm, for example:
    simpair: drift alarm in nightly-score/nightly: tokens psi 2.31 > 0.25 against the reference
    model: simpair-paraphrase v3
    run: lucky-heron (5e0b...), scoring run prefect-5e0b...
    alarms: 2
    drift alarm: tokens psi 2.31 > 0.25 against the reference; scoring run prefect-5e0b... of ...
    report: /srv/simpair/reports/2026-11-29-0c1f2a3b/night.md
"""

from __future__ import annotations

import os
from pathlib import Path

from prefect.automations import Automation, EventTrigger, SendNotification
from prefect.blocks.core import Block
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.events import emit_event
from prefect.runtime import flow_run

from simpair import settings
from simpair.nightly.profile import NotifyPlan, load_profile
from simpair.nightly.report import PAGE, reports_root
from simpair.nightly.scored_run import ScoredRun

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


ALARM_AUTOMATION = "simpair nightly: notify on drift"
ALARM_EVENT = "simpair.monitor.alarm"
# Prefect keeps an event's payload; these name what a person reads first (the first alarmed statistic)
ALARM_SUBJECT = (
    "simpair: drift alarm in {{ flow.name or 'nightly-score' }}/{{ deployment.name or '-' }}: "
    "{{ event.payload.first }}"
)
ALARM_BODY = "\n".join(
    [
        "model: {{ event.payload.model }} v{{ event.payload.version }}",
        "run: {{ flow_run.name or '-' }} ({{ flow_run.id or '-' }}), scoring run {{ event.payload.run_id }}",
        "alarms: {{ event.payload.alarms }}",
        "{{ event.payload.lines }}",
        "report: {{ event.payload.report }}",
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


def report_line(home: Path) -> str:
    """A failed night's report page (`simpair.nightly.report.page_on_failure` writes it in `home`, named
    by the night's date and the first 8 characters of its flow run id); other runs get no such line."""
    folder = "{{ flow_run.start_time.strftime('%Y-%m-%d') }}-{{ (flow_run.id|string)[:8] }}"
    return (
        # a run set Failed before it ever ran (run_count 0) wrote no page
        "{% if flow.name == 'nightly-retrain' and flow_run.state.name == 'Failed' and flow_run.run_count %}"
        f"\nreport: {reports_root(home)}/{folder}/{PAGE}"
        "{% endif %}"
    )


def failure_automation(block_document_id: object, home: Path | None = None) -> Automation:
    """The automation itself: one notification per run that turns Failed, Crashed, TimedOut or Late;
    with `home` (the pipeline home the workers share), a failed night's message names its report page."""
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
        actions=[
            SendNotification(
                block_document_id=block_document_id,
                subject=SUBJECT,
                body=BODY + (report_line(home) if home is not None else ""),
            )
        ],
    )


def alarm_automation(block_document_id: object) -> Automation:
    """One notification per `simpair.monitor.alarm` event (one event per alarmed scoring run)."""
    return Automation(
        name=ALARM_AUTOMATION,
        description="notify when a nightly-score run's traffic drifts past the monitor's thresholds",
        trigger=EventTrigger(
            expect={ALARM_EVENT},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            for_each={"prefect.resource.id"},
            posture="Reactive",
            threshold=1,
        ),
        actions=[
            SendNotification(block_document_id=block_document_id, subject=ALARM_SUBJECT, body=ALARM_BODY)
        ],
    )


def alarm_payload(run: ScoredRun, report: str | None) -> dict[str, object]:
    """What the alarm event carries: the first alarmed statistic by name, every alarm as a line."""
    first = next(row for row in run.drift if row.alarm)
    return {
        "first": first.line(),
        "statistic": first.statistic,
        "test": first.test,
        "value": first.value,
        "threshold": first.threshold,
        "against": first.against,
        "alarms": run.alarms,
        "lines": "\n".join(run.alarm_lines()),
        "run_id": run.run_id,
        "model": run.model,
        "version": run.version,
        "monitor": run.monitor,
        "report": report or "-",
    }


def emit_alarm(run: ScoredRun, report: str | None = None) -> bool:
    """Emit `simpair.monitor.alarm` for the current flow run when `run` has an alarmed statistic; the
    server's `notify on drift` automation turns it into a message. False (nothing emitted) when the
    run has no alarm or runs outside a flow run (an in-process run prints its alarm lines instead)."""
    run_id = flow_run.get_id()
    if not run_id or not any(row.alarm for row in run.drift):
        return False
    resource = {
        "prefect.resource.id": f"prefect.flow-run.{run_id}",
        "prefect.resource.name": flow_run.get_name() or "",
    }
    return emit_event(ALARM_EVENT, resource=resource, payload=alarm_payload(run, report)) is not None


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
    verb = _put(failure_automation(block_id, settings.home_dir(create=False)))
    alarm_verb = _put(alarm_automation(block_id))
    watched = f"{', '.join(WATCHED_STATES)} of {', '.join(WATCHED_FLOWS)}"
    return (
        f"notifications: {verb} automation {AUTOMATION_NAME!r} ({watched}), {alarm_verb} "
        f"{ALARM_AUTOMATION!r} ({ALARM_EVENT} events) -> {what}"
    )


def _put(automation: Automation) -> str:
    """Create the automation, or update the one of its name; `created` or `updated`."""
    try:
        existing = Automation.read(name=automation.name)
    except ValueError:
        automation.create()
        return "created"
    automation.id = existing.id
    automation.update()
    return "updated"
