"""The `nightly-score` flow: every new Parquet batch in an inbox scored exactly once by one model.

The DAG: pin the model -> list inbox -> hash files (mapped) -> plan (claims, quarantines) -> score
chunks (mapped over every pending chunk of every file) -> finalize each file once its chunks are in
-> summary artifact. Chunks fan out through whatever task runner the flow runs with: threads by
default, a Dask cluster with `prefect-dask` (`run(..., dask_address=...)` or `local_cluster=N`).
The run lock is held by the flow process for the whole run; workers only touch the ledger rows of
the chunks they were given. Like the pinned model, the precision (`fp32`, or the opt-in `bf16`) is
decided once in the flow process and handed to every chunk task as an argument, which is how Dask
workers receive every setting.
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow, runtime, unmapped

from simpair import settings
from simpair.scoring.contract import load_contract
from simpair.scoring.ledger import run_lock
from simpair.scoring.run import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CHUNK_ROWS,
    DEFAULT_PRECISION,
    ScoreSummary,
    new_run_id,
    summarize,
)
from simpair.scoring.scorer import check_precision, default_threads, resolve_precision
from simpair.tasks.scoring import (
    finalize_file_task,
    hash_file_task,
    list_inbox_task,
    plan_files_task,
    publish_summary_task,
    resolve_model_task,
    score_chunk_task,
    start_run_task,
)


@flow(name="nightly-score", log_prints=True)
def nightly_score(
    inbox: str,
    out: str,
    model: str | None = None,
    home: str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: int | None = None,
    lock_wait: float = 0.0,
    contract: str | None = None,
    backend: str = "auto",
    precision: str = DEFAULT_PRECISION,
) -> ScoreSummary:
    """Score the inbox into `out`; see docs/scoring.md."""
    check_precision(precision, backend)  # a bad combination fails before the lock and any claim
    out_dir = Path(out).expanduser().resolve()
    home_dir = settings.home_dir(home)
    rules = load_contract(contract)
    with run_lock(out_dir, lock_wait):
        pinned = resolve_model_task(model, home_dir)
        effective = resolve_precision(precision, backend)
        run_id = f"prefect-{runtime.flow_run.id}" if runtime.flow_run.id else new_run_id()
        start_run_task(out_dir, run_id, pinned)
        files = list_inbox_task(inbox)
        hashed = hash_file_task.map(files).result()
        plans = plan_files_task(hashed, out_dir, pinned, run_id, rules, chunk_rows, effective)
        began = time.perf_counter()
        to_score = [p for p in plans if p.action == "score"]
        chunks = {
            p.sha256: score_chunk_task.map(
                unmapped(p), p.pending, unmapped(pinned), unmapped(run_id), unmapped(rules),
                unmapped(batch_size), unmapped(threads), unmapped(backend), unmapped(effective),
            )
            for p in to_score
        }  # fmt: skip
        finals = [finalize_file_task.submit(p, chunks[p.sha256], pinned, run_id, effective) for p in to_score]
        file_results = [f.result() for f in finals]
        chunk_results = [r for futures in chunks.values() for r in futures.result()]
        seconds = time.perf_counter() - began
        summary = summarize(run_id, pinned, plans, file_results, chunk_results, seconds, effective, precision)
        publish_summary_task(out_dir, summary)
    print(
        f"scored {summary.files_scored} files ({summary.rows_scored} rows, "
        f"{summary.rows_rejected} rejected), "
        f"skipped {summary.files_skipped}, quarantined {summary.files_quarantined}; "
        f"{summary.pairs_per_s} pairs/s with {summary.model_name}/{summary.model_version} "
        f"in {summary.precision}"
    )
    return summary


def run(
    inbox: str,
    out: str | Path,
    model: str | None = None,
    home: str | Path | None = None,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: int | None = None,
    backend: str = "auto",
    precision: str = DEFAULT_PRECISION,
    lock_wait: float = 0.0,
    dask_address: str | None = None,
    local_cluster: int | None = None,
) -> ScoreSummary:
    """Run the flow, on a Dask cluster if asked (existing scheduler, or a LocalCluster of N processes)."""
    flow_fn = nightly_score
    if dask_address or local_cluster:
        from prefect_dask import DaskTaskRunner

        if dask_address:
            runner = DaskTaskRunner(address=dask_address)
        else:
            assert local_cluster is not None
            runner = DaskTaskRunner(
                cluster_kwargs={"n_workers": local_cluster, "processes": True, "threads_per_worker": 1}
            )
            threads = threads or default_threads(local_cluster)
        flow_fn = nightly_score.with_options(task_runner=runner)
    return flow_fn(
        inbox=str(inbox),
        out=str(out),
        model=model,
        home=None if home is None else str(home),
        chunk_rows=chunk_rows,
        batch_size=batch_size,
        threads=threads,
        lock_wait=lock_wait,
        backend=backend,
        precision=precision,
    )
