"""Output commit: merge a batch's chunk parts into its one output (and rejects) file, mark it done.

Runs once per file after all its chunks are in. A chunk that hit corrupt data quarantines the whole
file instead (its staged parts are deleted, nothing is written). Either way the file's staging
folder is removed afterwards.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from simpair.runtime.model_ref import ModelRef
from simpair.scoring.chunk import ChunkResult
from simpair.scoring.ledger import Ledger
from simpair.scoring.plan import FilePlan, scored_as
from simpair.scoring.writer import REJECTS_SCHEMA, chunk_paths, merge_parts, staging_dir
from simpair.stages import step


@dataclass(frozen=True)
class FileResult:
    """The outcome of one batch this run worked on."""

    name: str
    sha256: str
    status: str  # 'scored' | 'rescored' (another version scored it before) | 'quarantined'
    rows_scored: int = 0
    rows_rejected: int = 0
    rows_truncated: int = 0
    output_path: str | None = None
    rejects_path: str | None = None
    reason: str | None = None


@step("finalize-file", run_name="finalize-{plan.name}")
def finalize_file(
    plan: FilePlan,
    results: list[ChunkResult],
    model: ModelRef,
    run_id: str,
    precision: str,
) -> FileResult:
    """Merge a batch's chunk parts into its output (and rejects) file and mark it done.

    Every chunk must be recorded in the ledger as scored by the pinned model in `precision`: the
    output then holds each input row exactly once, in input order, whichever run scored which chunk.
    A re-score (`plan.rescore`) is recorded on its own ledger row, so the batch's other scorings stay done.
    """
    assert plan.sha256 and plan.output_path and plan.rejects_path and plan.output_schema
    out, ledger = Path(plan.out), Ledger(plan.out)
    problems = [r.problem for r in results if r.problem]
    if problems:
        if plan.rescore:
            ledger.rescore_quarantined(
                plan.sha256, model.name, model.version, reason=problems[0], run_id=run_id
            )
        else:
            ledger.quarantine(sha256=plan.sha256, name=plan.name, size=0, reason=problems[0], run_id=run_id)
        shutil.rmtree(staging_dir(out, plan.sha256), ignore_errors=True)
        return FileResult(plan.name, plan.sha256, "quarantined", reason=problems[0])
    done = ledger.chunks(plan.sha256)
    missing = [i for i in range(plan.n_chunks) if not scored_as(done.get(i), model, precision)]
    if missing:
        raise RuntimeError(
            f"{plan.name}: chunks {missing[:5]} not scored by {model.label} in {precision}; cannot finalize"
        )
    parts = [chunk_paths(out, plan.sha256, i) for i in range(plan.n_chunks)]
    rows = merge_parts((p for p, _ in parts), Path(plan.output_path), plan.output_schema)
    rejected = sum(done[i].rows_rejected for i in range(plan.n_chunks))
    expected = plan.n_rows - rejected
    if rows != expected:
        raise RuntimeError(f"{plan.name}: merged {rows} rows, expected {expected}; output not marked done")
    rejects_path = None
    if rejected:
        rejects_path = plan.rejects_path
        merge_parts((r for _, r in parts if r.exists()), Path(rejects_path), REJECTS_SCHEMA)
    if plan.rescore:
        ledger.rescore_done(
            plan.sha256, model.name, model.version, rows_scored=rows, rows_rejected=rejected, run_id=run_id
        )
    else:
        ledger.file_done(plan.sha256, rows_scored=rows, rows_rejected=rejected, run_id=run_id)
    shutil.rmtree(staging_dir(out, plan.sha256), ignore_errors=True)
    return FileResult(
        plan.name,
        plan.sha256,
        "rescored" if plan.rescore else "scored",
        rows_scored=rows,
        rows_rejected=rejected,
        rows_truncated=sum(done[i].rows_truncated for i in range(plan.n_chunks)),
        output_path=plan.output_path,
        rejects_path=rejects_path,
    )
