"""Chunk execution: read, validate, score and write one chunk of a planned file, then record it.

Runs wherever the runner puts it (this process, a thread, a Dask worker): everything it needs comes
in as arguments, and the ledger row it writes is its only shared state. Redoing a chunk overwrites
the same part files and ledger row, so a chunk may be retried. With `monitor` on, the chunk also
profiles the rows it scored (`simpair.monitoring.traffic.chunk_profile`: a few fixed-size
histograms and counters under the run's monitor folder), which the run's end merges and checks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from simpair.monitoring.traffic import chunk_dir, chunk_profile, duplicates
from simpair.runtime.embedding_store import EmbeddingStore, StoreCounts
from simpair.runtime.loader import load_for_run
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import RuntimeOptions
from simpair.runtime.stored_predict import open_stores
from simpair.scoring.contract import ScoringContract
from simpair.scoring.ledger import Ledger
from simpair.scoring.plan import FilePlan
from simpair.scoring.reader import FileProblem, read_chunk, validate_rows
from simpair.scoring.records import ChunkRecord
from simpair.scoring.scorer import score_columns
from simpair.scoring.writer import REJECTS_SCHEMA, chunk_paths
from simpair.scoring.writer import write_atomic as write_part
from simpair.stages import step


@dataclass(frozen=True)
class ChunkResult:
    """One chunk scored in this run (or the corrupt-data problem that stopped it)."""

    sha256: str
    idx: int
    rows_in: int = 0
    rows_scored: int = 0
    rows_rejected: int = 0
    rows_truncated: int = 0
    seconds: float = 0.0
    problem: str | None = None
    sentences_encoded: int = 0  # bi-encoders with the embedding store: distinct sentences encoded
    memory_hits: int = 0  # ... and found in the store's memory / on disk instead
    disk_hits: int = 0
    profile: str | None = None  # the chunk's partial traffic profile (folder), when monitored


@step("score-chunk", run_name="score-{plan.name}-{idx}", retries=2, retry_delay_seconds=5)
def score_chunk(
    plan: FilePlan,
    idx: int,
    model: ModelRef,
    run_id: str,
    contract: ScoringContract,
    runtime: RuntimeOptions,
    precision: str,
    monitor: bool = False,
) -> ChunkResult:
    """Read, validate, score and write chunk `idx` of a planned file, then record it in the ledger.

    `runtime` gives the batch size, threads, backend and embedding store (bi-encoders and a stack's
    bi members: vectors kept across the run's chunks); `precision` is the run's resolved precision
    (`simpair.runtime.resolve`). A worker that cannot run it natively (bf16
    pinned by a driver with native bf16, on a worker without) fails the chunk rather than score it
    in another precision than the rest of the run (`simpair.runtime.loader.load_for_run`).
    `monitor`: also profile the scored rows for the run's drift check (`simpair.monitoring.traffic`).
    """
    assert plan.sha256 and plan.layout and plan.output_schema, "score_chunk needs a file planned to score"
    began = time.perf_counter()
    start, stop = plan.bounds(idx)
    try:
        table = read_chunk(plan.url, plan.layout, start, stop)
    except FileProblem as problem:
        return ChunkResult(plan.sha256, idx, problem=str(problem))
    checked = validate_rows(table, contract, start)
    predictor = load_for_run(model.local_dir, runtime, precision)
    stores, counts = _stores(plan, model, runtime, precision, predictor), StoreCounts()
    scores = score_columns(
        predictor,
        model,
        run_id,
        checked.text_a,
        checked.text_b,
        checked.cut,
        runtime.batch_size,
        precision=precision,
        stores=stores,
        counts=counts,
    )
    kept = checked.kept
    scored = pa.Table.from_arrays(kept.columns + scores.columns, schema=plan.output_schema)
    part, rejects_part = chunk_paths(Path(plan.out), plan.sha256, idx)
    write_part(scored, part)
    if checked.rejects:
        rows = [
            dict(zip(("row_index", "reason", "field", "text_a", "text_b", "pair_id"), r, strict=True))
            | {"source_file": plan.name, "source_sha256": plan.sha256, "run_id": run_id}
            for r in checked.rejects
        ]
        write_part(pa.Table.from_pylist(rows, schema=REJECTS_SCHEMA), rejects_part)
    else:
        rejects_part.unlink(missing_ok=True)  # a redo of a chunk that once had rejects must not keep them
    truncated = int(scores.column("truncated").to_numpy(zero_copy_only=False).sum())
    profile = None
    if monitor:
        try:  # the chunk's outputs are written: a profiling fault must not make the chunk fail and redo
            profile = chunk_profile(
                predictor, model, run_id, chunk_dir(plan.out, model, run_id, plan.sha256, idx),
                checked.text_a, checked.text_b, scores.column("score").to_numpy(zero_copy_only=False),
                {"rows_in": table.num_rows, "rejected": len(checked.rejects), "truncated": truncated,
                 "duplicates": duplicates(checked.text_a, checked.text_b)},
            )  # fmt: skip
        except Exception as exc:
            print(f"{plan.name} chunk {idx}: not profiled for monitoring ({type(exc).__name__}: {exc})")
    seconds = time.perf_counter() - began
    result = ChunkResult(
        plan.sha256,
        idx,
        rows_in=table.num_rows,
        rows_scored=scored.num_rows,
        rows_rejected=len(checked.rejects),
        rows_truncated=truncated,
        seconds=seconds,
        sentences_encoded=counts.encoded,
        memory_hits=counts.memory_hits,
        disk_hits=counts.disk_hits,
        profile=profile,
    )
    Ledger(plan.out).chunk_done(
        plan.sha256,
        ChunkRecord(
            idx=idx,
            rows_in=result.rows_in,
            rows_scored=result.rows_scored,
            rows_rejected=result.rows_rejected,
            rows_truncated=result.rows_truncated,
            model_name=model.name,
            model_version=model.version,
            run_id=run_id,
            seconds=seconds,
            precision=precision,
        ),
    )
    return result


def run_store(out: str | Path, runtime: RuntimeOptions) -> Path:
    """The run's embedding store: the folder kept across runs, else `<out>/_ledger/embeddings/`."""
    return runtime.store_folder(Path(out) / "_ledger" / "embeddings")


def _stores(
    plan: FilePlan, model: ModelRef, runtime: RuntimeOptions, precision: str, predictor: Any
) -> dict[int, EmbeddingStore]:
    """The run's embedding stores (a bi-encoder's, a stack's bi members'); none when off."""
    if not runtime.embedding_store:
        return {}
    folder = run_store(plan.out, runtime)
    return open_stores(predictor, model, precision, str(folder), runtime.embedding_memory_mb)
