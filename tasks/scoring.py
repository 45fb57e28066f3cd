"""Prefect tasks for nightly scoring: each wraps one step of `simpair.scoring.run`, nothing more.

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

from simpair.scoring.contract import ScoringContract
from simpair.scoring.inbox import InboxFile, list_inbox
from simpair.scoring.ledger import Ledger
from simpair.scoring.model_ref import ModelRef, resolve_model_spec
from simpair.scoring.run import (
    ChunkResult,
    FilePlan,
    FileResult,
    HashedFile,
    ScoreSummary,
    finalize_file,
    hash_file,
    plan_files,
    score_chunk,
    summary_markdown,
)


@task(name="resolve-model", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5)
def resolve_model_task(spec: str | None, home: Path) -> ModelRef:
    """Pin the alias to one version, once per run."""
    return resolve_model_spec(spec, home)


@task(name="start-run", cache_policy=NO_CACHE)
def start_run_task(out: Path, run_id: str, model: ModelRef) -> None:
    Ledger(out).start_run(run_id, model.name, model.version)


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
    precision: str = "fp32",
) -> list[FilePlan]:
    """Sequential on purpose: the one step that claims files in the ledger."""
    return plan_files(hashed, out, model, run_id, contract, chunk_rows, precision)


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
    batch_size: int,
    threads: int | None,
    backend: str = "torch",
    precision: str = "fp32",
) -> ChunkResult:
    """Runs wherever the task runner puts it (a thread, a Dask worker): every setting is an argument."""
    return score_chunk(plan, idx, model, run_id, contract, batch_size, threads, backend, precision)


@task(name="finalize-file", task_run_name="finalize-{plan.name}", cache_policy=NO_CACHE)
def finalize_file_task(
    plan: FilePlan, results: list[ChunkResult], model: ModelRef, run_id: str, precision: str = "fp32"
) -> FileResult:
    return finalize_file(plan, results, model, run_id, precision)


@task(name="publish-score-summary", cache_policy=NO_CACHE)
def publish_summary_task(out: Path, summary: ScoreSummary) -> UUID:
    """Record the run in the ledger and publish its summary as a markdown artifact."""
    Ledger(out).finish_run(summary.run_id, summary.to_dict())
    return create_markdown_artifact(
        key="nightly-score-summary",
        markdown=summary_markdown(summary),
        description=(
            f"nightly scoring with {summary.model_name}/{summary.model_version} in {summary.precision}"
        ),
    )
