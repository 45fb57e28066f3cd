"""The `nightly-score` flow: every new Parquet batch in an inbox scored exactly once by one model.

The DAG is `simpair.scoring.run.run_scoring`, the same one `simpair score --no-prefect` runs in
process; this flow runs each of its steps as its Prefect task (`simpair.tasks.scoring`, built from
the step's declaration), listed below in the DAG's order:

    resolve-model -> start-run -> list-inbox -> hash-file (mapped over files) -> decide-rescore -> plan-files
    -> score-chunk (mapped over every pending chunk of every file)
    -> finalize-file (one per file, once its chunks are in)
    -> profile-traffic (the run's traffic profile and drift report, the profile's `monitor:` block)
    -> publish-score-summary
    -> write-review-queue (when the profile has a `review:` block)
    -> publish-night-report-scoring (a run with a `profile`: the run added to the night's report page)
    then, when the run's monitor raised an alarm, the event `simpair.monitor.alarm` (a notification)

Chunks fan out through whatever task runner the flow runs with: threads by default, a Dask cluster
with `prefect-dask` (`simpair.flows.launch.score(..., dask_address=...)` or `local_cluster=N`). The
run lock is held by the flow process for the whole run; workers only touch the ledger rows of the
chunks they were given.
Like the pinned model, the precision (`auto` from the model's cached verdict, or an explicit one) is
decided once in the flow process and handed to every chunk task as an argument, with the runtime part
of the `ScoringOptions` (`simpair.runtime.RuntimeOptions`), which is how Dask workers receive every
setting.

Each batch is scored once per model version. The `rescore` parameter scores batches that another
version already scored again with the pinned one; the nightly `profile`'s
`scoring.rescore_days_after_promotion` (N > 0) does so for the last N days' batches on the first run
after a promotion (the night's hand-off to scoring; `simpair.scoring.rescore`).
"""

from __future__ import annotations

from prefect import flow, runtime

from simpair import settings
from simpair.nightly.scored_run import ScoredRun
from simpair.ops.notifications import emit_alarm
from simpair.scoring.options import ScoringOptions
from simpair.scoring.run import run_scoring
from simpair.scoring.summary import ScoreSummary
from simpair.tasks.model_ref import resolve_model_task
from simpair.tasks.nightly import add_scoring_run_task
from simpair.tasks.scoring import (
    decide_rescore_task,
    finalize_file_task,
    hash_file_task,
    list_inbox_task,
    monitor_policy,
    plan_files_task,
    profile_traffic_task,
    promotion_rescore_days,
    publish_summary_task,
    review_policy,
    score_chunk_task,
    start_run_task,
    write_review_queue_task,
)
from simpair.tasks.stages import PrefectStages

# the scoring DAG's steps, each as its Prefect task, in the order `run_scoring` runs them
STEPS = PrefectStages(
    [
        resolve_model_task,
        start_run_task,
        list_inbox_task,
        hash_file_task,  # mapped over the inbox files
        decide_rescore_task,  # re-score batches another version scored? (once)
        plan_files_task,  # sequential: the one step that claims files
        score_chunk_task,  # mapped over every pending chunk of every file
        finalize_file_task,  # one per file, waits for that file's chunks only
        profile_traffic_task,  # chunk profiles merged, drift against the reference (monitor.enabled)
        publish_summary_task,  # ledger + the `nightly-score-summary` artifact
        write_review_queue_task,  # tonight's review queue under <out>/_review/<run_id>/ (profile `review:`)
    ]
)


@flow(name="nightly-score", log_prints=True)
def nightly_score(
    inbox: str,
    out: str,
    options: ScoringOptions | None = None,
    model: str | None = None,
    rescore: bool = False,
    profile: str | None = "default",
) -> ScoreSummary:
    """Score the inbox into `out`; see docs/scoring.md. `model` (`name@alias`, `name/version`),
    when given, overrides `options.model` (the deployment's parameter; default the paraphrase champion).
    `rescore` scores batches another model version scored again with the pinned one; `profile` is the
    nightly profile whose `scoring.rescore_days_after_promotion` applies (None: not read)."""
    run_id = f"prefect-{runtime.flow_run.id}" if runtime.flow_run.id else None
    after_promotion = promotion_rescore_days(profile)
    options = ScoringOptions.build(
        options, model=model, rescore=rescore or None, rescore_days_after_promotion=after_promotion,
        review=review_policy(profile), monitor=monitor_policy(profile, (options or ScoringOptions()).monitor),
    )  # fmt: skip
    summary = run_scoring(inbox, out, options, STEPS, run_id)
    print(
        f"scored {summary.files_scored} files ({summary.rows_scored} rows, "
        f"{summary.rows_rejected} rejected), "
        f"skipped {summary.files_skipped}, quarantined {summary.files_quarantined}, "
        f"re-scored {summary.files_rescored}; "
        f"{summary.pairs_per_s} pairs/s with {summary.model_name}/{summary.model_version} "
        f"in {summary.precision}" + (f" ({summary.precision_why})" if summary.precision_why else "")
    )
    # a night's run (a profile given: the deployment) joins the night's report; each alarm is printed with
    # it, and the server's `notify on drift` automation sends them (simpair.ops.notifications)
    scored = ScoredRun.from_summary(summary.to_dict())
    report = None
    if profile is not None:
        report = add_scoring_run_task(home=settings.home_dir(options.home), run=scored).path
        print(f"nightly-score: report {report}")
    for line in scored.alarm_lines(report):
        print(line)
    emit_alarm(scored, report)
    return summary
