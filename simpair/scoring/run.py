"""The scoring DAG, defined once: which stage runs after which, on what, for both ways of running it.

`run_scoring(inbox, out, options, runner)` is the one definition of a scoring run. Its stages are
plain functions of this package, each safe to run in another process (the ledger is the only shared
state):

1. `resolve_model_ref` pins `options.model` to one version (once, before any chunk).
2. `start_run` records the run in the ledger; `list_inbox` lists the batches.
3. `hash_file`, mapped over the inbox files (parallel, read-only).
4. `decide_rescore`: whether batches another model version scored are scored again, and which
   (`--rescore`, or the window after a promotion); then `plan_files`: the one sequential pass that
   claims files and quarantines what cannot be scored.
5. `score_chunk`, mapped over every pending chunk of every file (parallel).
6. `finalize_file`, one per file once its chunks are in: merge, or quarantine on corrupt data.
7. `profile_traffic`, when `options.monitor` is on: the chunks' partial profiles merged into the
   run's traffic profile, compared with the version's reference and its last runs
   (`simpair.monitoring.traffic`, under `<out>/_monitor/<model>/<version>/<run_id>/`).
8. `finish_run`: the summary (`summarize`, with the monitor's verdict) recorded in the ledger.
9. `write_review_queue`, when `options.review` is set: tonight's review queue from the run's outputs
   (`simpair.review.write`, under `<out>/_review/<run_id>/`).

The `runner` (`simpair.stages`) decides how a stage runs: `InProcess` calls each stage here, in the
order above (`score_inbox`, `simpair score --no-prefect`); `simpair.tasks.stages.PrefectStages` runs
each as its Prefect task, mapped or submitted to the flow's task runner (threads, Dask). Both see the
same calls in the same order, so they claim, score, quarantine and record the same things.

Precision (`auto` default: the model's cached precision verdict; `fp32`, `bf16` and `int8` explicit)
is resolved once per run (`simpair.runtime.resolve`) and passed to every stage like the
pinned model. `auto` is fixed per model, not per run, so a resumed run scores in the same precision:
chunks get it with the runtime options alone, record it in the ledger and on every output row, and
a resumed batch rescores chunks scored in another precision, so one output file never mixes them.

Bi-encoder runs share one embedding store across all their chunks and files (`embedding_store`); a
finished run releases it (`release_store`), a killed one leaves it for the resumed run to reuse.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simpair.monitoring.traffic import MonitorOutcome, profile_traffic
from simpair.review.write import write_review_queue
from simpair.runtime.embedding_store import release_store
from simpair.runtime.model_ref import ModelRef, resolve_model_ref
from simpair.runtime.resolve import resolve_run
from simpair.scoring.chunk import ChunkResult, run_store, score_chunk
from simpair.scoring.commit import FileResult, finalize_file
from simpair.scoring.contract import load_contract
from simpair.scoring.inbox import list_inbox
from simpair.scoring.ledger import Ledger
from simpair.scoring.lock import run_lock
from simpair.scoring.options import ScoringOptions
from simpair.scoring.plan import FilePlan, hash_file, plan_files
from simpair.scoring.rescore import decide_rescore
from simpair.scoring.summary import ScoreSummary, summarize
from simpair.stages import InProcess, StageRunner, step


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:8]


@step("start-run")
def start_run(out: Path, run_id: str, model: ModelRef) -> None:
    """Record the run as running in the ledger (a later run marks it crashed if it never finishes)."""
    Ledger(out).start_run(run_id, model.name, model.version)


@step("publish-score-summary")
def finish_run(out: Path, summary: ScoreSummary) -> None:
    """Record the finished run and its summary in the ledger."""
    Ledger(out).finish_run(summary.run_id, summary.to_dict())


def run_scoring(
    inbox: str,
    out: str | Path,
    options: ScoringOptions,
    runner: StageRunner,
    run_id: str | None = None,
) -> ScoreSummary:
    """Score every new batch in `inbox` into `out`: the scoring DAG, each stage run by `runner`.

    The run lock is held here for the whole run; the model and the precision are decided here, once,
    and handed to every stage as arguments (which is how Dask workers receive every setting).
    Raises `RunLocked` if another run holds `out` for longer than `options.lock_wait` seconds.
    """
    from simpair.settings import home_dir

    out_dir = Path(out).expanduser().resolve()
    contract = load_contract(options.contract)
    with run_lock(out_dir, options.lock_wait):
        model = runner.run(resolve_model_ref, spec=options.model, home=home_dir(options.home))
        # read from the stored verdict (int8: its stored check) once per run, with the recheck band and
        # bf16 runtime that precision loads with: every worker scores the same way
        precision, why, pin = resolve_run(
            options.precision, options.backend, model=model, home=home_dir(options.home)
        )
        run_id = run_id or new_run_id()
        runner.run(start_run, out=out_dir, run_id=run_id, model=model)
        files = runner.run(list_inbox, inbox=inbox)
        hashed = runner.result(runner.map(hash_file, {"file": files}))
        rescore = runner.run(decide_rescore, out=out_dir, model=model, options=options)
        plans = runner.run(
            plan_files, hashed=hashed, out=out_dir, model=model, run_id=run_id, contract=contract,
            chunk_rows=options.chunk_rows, precision=precision, rescore=rescore,
        )  # fmt: skip
        began = time.perf_counter()
        to_score = [p for p in plans if p.action == "score"]
        runtime = options.runtime.model_copy(update={"pin": pin})  # all a chunk needs of the options
        chunks = {
            p.sha256: runner.map(
                score_chunk, {"idx": p.pending}, plan=p, model=model, run_id=run_id, contract=contract,
                runtime=runtime, precision=precision, monitor=options.monitored,
            )
            for p in to_score
        }  # fmt: skip
        finals = [
            runner.submit(
                finalize_file, plan=p, results=chunks[p.sha256], model=model, run_id=run_id,
                precision=precision,
            )
            for p in to_score
        ]  # fmt: skip
        file_results = [runner.result(f) for f in finals]
        chunk_results = [r for started in chunks.values() for r in runner.result(started)]
        seconds = time.perf_counter() - began
        store = run_store(out_dir, options)
        # a bi-encoder always looks its sentences up; a stack only when it has bi members
        looked_up = model.kind == "bi" or any(
            c.sentences_encoded + c.memory_hits + c.disk_hits for c in chunk_results
        )
        summary = summarize(
            run_id, model, plans, file_results, chunk_results, seconds, precision, options.precision,
            embedding_store=str(store) if options.embedding_store and looked_up else None,
            embedding_store_kept=options.keeps_store,
            rescore=rescore.note if rescore else None, precision_why=why,
        )  # fmt: skip
        if options.monitored:
            monitored = runner.run(
                profile_traffic, out=out_dir, run_id=run_id, model=model,
                parts=traffic_parts(file_results, chunk_results),
                health=run_health(plans, file_results, summary.pairs_per_s),
                policy=options.monitor, home=home_dir(options.home), runtime=runtime, precision=precision,
            )  # fmt: skip
            summary = with_monitor(summary, monitored)
        runner.run(finish_run, out=out_dir, summary=summary)
        if options.review is not None:
            outputs = [r.output_path for r in file_results if r.output_path]
            runner.run(
                write_review_queue, out=out_dir, run_id=run_id, model=model, outputs=outputs,
                policy=options.review, home=options.home,
            )  # fmt: skip
        release_store(store, keep=options.keeps_store)
    return summary


def traffic_parts(file_results: list[FileResult], chunk_results: list[ChunkResult]) -> list[str]:
    """The partial profiles of the chunks this run scored into an output (a quarantined file's left out)."""
    kept = {r.sha256 for r in file_results if r.status in ("scored", "rescored")}
    return [c.profile for c in chunk_results if c.profile and c.sha256 in kept]


def run_health(plans: list[FilePlan], file_results: list[FileResult], pairs_per_s: float) -> dict[str, float]:
    """The run's health figures the chunks cannot know: rows of the files quarantined now, pairs/s."""
    quarantined_now = {r.sha256 for r in file_results if r.status == "quarantined"}
    rows = sum(p.n_rows for p in plans if p.action == "quarantined" or p.sha256 in quarantined_now)
    return {"quarantined": float(rows), "pairs_per_s": float(pairs_per_s)}


def with_monitor(summary: ScoreSummary, monitored: MonitorOutcome) -> ScoreSummary:
    """The summary with the monitor's report path, alarm count and one-line verdict."""
    summary.monitor, summary.monitor_alarms = monitored.report, monitored.alarms
    summary.monitor_note = monitored.note
    return summary


def score_inbox(
    inbox: str,
    out: str | Path,
    model: str | None = None,
    home: Path | None = None,
    options: ScoringOptions | None = None,
    *,
    on_chunk_done: Callable[[ChunkResult], None] | None = None,
    **overrides: Any,
) -> ScoreSummary:
    """Score every new batch in `inbox` into `out`, in this process (no Prefect): `run_scoring` in order.

    `options` (or keyword `overrides` of its fields, e.g. `chunk_rows=1000`) say how; `model` and
    `home`, when given, override theirs. `on_chunk_done` is called after each chunk is recorded
    (progress bars; tests use it to promote a model mid-run).
    """
    options = ScoringOptions.build(options, model=model, home=home, **overrides)

    def after(stage: Callable[..., Any], value: Any) -> None:
        if on_chunk_done and stage is score_chunk:
            on_chunk_done(value)

    return run_scoring(inbox, out, options, InProcess(after))
