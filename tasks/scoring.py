"""Prefect tasks for nightly scoring: each wraps one stage of `simpair.scoring.run`, nothing more.

`simpair.tasks.stages.PrefectStages` runs the scoring DAG (`simpair.scoring.run.run_scoring`) with
each stage as its task here (and the shared `resolve-model` task of `simpair.tasks.model_ref`). Every
task takes the same keyword arguments as the stage it wraps.

Caching is off: exactly-once is the ledger's job (keyed by file content), and a Prefect cache keyed
on arguments would skip a run whose files changed under the same names. Chunk scoring is idempotent
(a redo overwrites the same part and ledger row), so it may retry.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from simpair.nightly.profile import load_profile
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import RuntimeOptions
from simpair.scoring.chunk import ChunkResult, score_chunk
from simpair.scoring.commit import FileResult, finalize_file
from simpair.scoring.contract import ScoringContract
from simpair.scoring.inbox import InboxFile, list_inbox
from simpair.scoring.options import ScoringOptions
from simpair.scoring.plan import FilePlan, HashedFile, hash_file, plan_files
from simpair.scoring.rescore import Rescore, decide_rescore
from simpair.scoring.run import finish_run, start_run
from simpair.scoring.summary import ScoreSummary, summary_markdown


@task(name="decide-rescore", cache_policy=NO_CACHE)
def decide_rescore_task(out: Path, model: ModelRef, options: ScoringOptions) -> Rescore | None:
    """Whether batches another model version scored are scored again this run (and which)."""
    return decide_rescore(out, model, options)


@task(name="start-run", cache_policy=NO_CACHE)
def start_run_task(out: Path, run_id: str, model: ModelRef) -> None:
    start_run(out, run_id, model)


@task(name="list-inbox", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5)
def list_inbox_task(inbox: str) -> list[InboxFile]:
    return list_inbox(inbox)


@task(name="hash-file", task_run_name="hash-{file.name}", cache_policy=NO_CACHE)
def hash_file_task(file: InboxFile) -> HashedFile:
    return hash_file(file)


@task(name="plan-files", cache_policy=NO_CACHE)
def plan_files_task(
    hashed: list[HashedFile],
    out: Path,
    model: ModelRef,
    run_id: str,
    contract: ScoringContract,
    chunk_rows: int,
    precision: str,
    rescore: Rescore | None = None,
) -> list[FilePlan]:
    """Sequential on purpose: the one step that claims files in the ledger."""
    return plan_files(hashed, out, model, run_id, contract, chunk_rows, precision, rescore)


@task(
    name="score-chunk",
    task_run_name="score-{plan.name}-{idx}",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=5,
)
def score_chunk_task(
    plan: FilePlan,
    idx: int,
    model: ModelRef,
    run_id: str,
    contract: ScoringContract,
    runtime: RuntimeOptions,
    precision: str,
) -> ChunkResult:
    """Runs wherever the task runner puts it (a thread, a Dask worker): every setting is an argument."""
    return score_chunk(plan, idx, model, run_id, contract, runtime, precision)


@task(name="finalize-file", task_run_name="finalize-{plan.name}", cache_policy=NO_CACHE)
def finalize_file_task(
    plan: FilePlan, results: list[ChunkResult], model: ModelRef, run_id: str, precision: str
) -> FileResult:
    return finalize_file(plan, results, model, run_id, precision)


@task(name="publish-score-summary", cache_policy=NO_CACHE)
def publish_summary_task(out: Path, summary: ScoreSummary) -> UUID:
    """Record the run in the ledger and publish its summary as a markdown artifact."""
    finish_run(out, summary)
    return create_markdown_artifact(
        key="nightly-score-summary",
        markdown=summary_markdown(summary),
        description=(
            f"nightly scoring with {summary.model_name}/{summary.model_version} in {summary.precision}"
        ),
    )


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
