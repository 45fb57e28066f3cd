"""Prefect tasks for nightly scoring: each step of `simpair.scoring.run.run_scoring`, built from its
declaration (`simpair.tasks.stages.as_task`), so every task takes the same arguments as its step.

The `nightly-score` flow runs the scoring DAG with these tasks (and the shared `resolve-model` task
of `simpair.tasks.model_ref`).

Caching is off: exactly-once is the ledger's job (keyed by file content), and a Prefect cache keyed
on arguments would skip a run whose files changed under the same names. Chunk scoring is idempotent
(a redo overwrites the same part and ledger row), so it may retry.
"""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_markdown_artifact

from simpair.monitoring.policy import MonitorPolicy
from simpair.monitoring.traffic import MonitorOutcome, profile_traffic
from simpair.nightly.profile import load_profile
from simpair.review.queue import ReviewPolicy
from simpair.review.write import write_review_queue
from simpair.scoring.chunk import score_chunk
from simpair.scoring.commit import finalize_file
from simpair.scoring.inbox import list_inbox
from simpair.scoring.plan import hash_file, plan_files
from simpair.scoring.rescore import decide_rescore
from simpair.scoring.run import finish_run, start_run
from simpair.scoring.summary import ScoreSummary, summary_markdown
from simpair.tasks.stages import as_task

decide_rescore_task = as_task(decide_rescore)
start_run_task = as_task(start_run)
list_inbox_task = as_task(list_inbox)
hash_file_task = as_task(hash_file)  # mapped over the inbox files
plan_files_task = as_task(plan_files)  # sequential on purpose: the one step that claims files in the ledger
# runs wherever the task runner puts it (a thread, a Dask worker): every setting is an argument
score_chunk_task = as_task(score_chunk)
finalize_file_task = as_task(finalize_file)  # one per file, waits for that file's chunks only


def _publish_summary(_: None, arguments: dict[str, Any]) -> None:
    summary: ScoreSummary = arguments["summary"]
    create_markdown_artifact(
        key="nightly-score-summary",
        markdown=summary_markdown(summary),
        description=(
            f"nightly scoring with {summary.model_name}/{summary.model_version} in {summary.precision}"
        ),
    )


def _publish_monitor(outcome: MonitorOutcome, arguments: dict[str, Any]) -> None:
    if outcome.markdown:
        create_markdown_artifact(
            key="nightly-score-monitor",
            markdown=outcome.markdown,
            description=f"drift of {arguments['model'].label}: {outcome.note}",
        )


# the run's traffic profile and its drift report, published as a markdown artifact
profile_traffic_task = as_task(profile_traffic, then=_publish_monitor)
# the run recorded in the ledger, and its summary published as a markdown artifact
publish_summary_task = as_task(finish_run, then=_publish_summary)
write_review_queue_task = as_task(write_review_queue)  # after the summary, when a review policy is set


def promotion_rescore_days(profile: str | None) -> int | None:
    """The nightly profile's `scoring.rescore_days_after_promotion`; None without a profile.

    A profile that does not load is reported in one line (the flow run's log) and leaves the option
    off: tonight's new batches are still scored.
    """
    if profile is None:
        return None
    try:
        return load_profile(profile).scoring.rescore_days_after_promotion
    except (OSError, ValueError) as exc:
        print(f"nightly profile {profile!r} not read ({exc}); no re-score after a promotion this run")
        return None


def review_policy(profile: str | None) -> ReviewPolicy | None:
    """The nightly profile's `review:` block (None: no profile, no block, or a profile that does not
    load, which is reported in one line: tonight's batches are still scored, with no queue)."""
    if profile is None:
        return None
    try:
        return load_profile(profile).review
    except (OSError, ValueError) as exc:
        print(f"nightly profile {profile!r} not read ({exc}); no review queue this run")
        return None


def monitor_policy(profile: str | None, asked: MonitorPolicy | None) -> MonitorPolicy | None:
    """What the run was asked (`simpair score`: on, or off with `--no-monitor`), else the nightly
    profile's `monitor:` block. No profile, or one that does not load (reported in one line): `asked`."""
    if profile is None or asked is not None:
        return asked
    try:
        return load_profile(profile).monitor
    except (OSError, ValueError) as exc:
        print(f"nightly profile {profile!r} not read ({exc}); default monitor thresholds this run")
        return asked
