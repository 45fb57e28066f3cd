"""One scoring run over an inbox, as the steps the Prefect flow maps and as `score_inbox(...)`.

Steps (each safe to run in another process; the ledger is the only shared state):

1. `hash_file`: content hash of each inbox file (parallel; read-only).
2. `plan_files`: one sequential pass that checks the ledger, reads footers, quarantines what cannot
   be scored and claims the rest, with the chunks still to do (all of them, or those a crashed run
   did not finish, or those a different model version scored).
3. `score_chunk`: read, validate, score and atomically write one chunk, then record it (parallel).
4. `finalize_file`: merge a batch's chunk parts into its date-partitioned output and rejects file,
   then mark the batch done (or quarantine it if a chunk hit corrupt data).
5. `summarize`: counts, pairs/s, the pinned model and precision, for the console and the Prefect artifact.

Precision (`fp32` default, `bf16` opt-in) is decided once per run (`resolve_precision`) and passed to
every step like the pinned model: chunks record it in the ledger and on every output row, and a
resumed batch rescores chunks scored in another precision, so one output file never mixes them.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from simpair.scoring.contract import ScoringContract, load_contract
from simpair.scoring.inbox import InboxFile, content_hash, list_inbox
from simpair.scoring.ledger import ChunkRecord, Ledger, run_lock
from simpair.scoring.model_ref import ModelRef, resolve_model_spec
from simpair.scoring.reader import FileLayout, FileProblem, inspect_file, read_chunk, validate_rows
from simpair.scoring.scorer import (
    SCORE_COLUMNS,
    SCORE_SCHEMA,
    check_precision,
    default_threads,
    load_pinned,
    resolve_precision,
    runnable_precision,
    score_columns,
)
from simpair.scoring.writer import REJECTS_SCHEMA, chunk_paths, merge_parts, output_paths, staging_dir
from simpair.scoring.writer import write_atomic as write_part

DEFAULT_CHUNK_ROWS = 8192
DEFAULT_BATCH_SIZE = 64
DEFAULT_PRECISION = "fp32"  # issue 5 asks for scores identical to fp32; bf16 is an explicit opt-in


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class HashedFile:
    """An inbox file and its content hash (None, with `error`, if it could not be read at all)."""

    file: InboxFile
    sha256: str | None
    error: str | None = None


def hash_file(file: InboxFile) -> HashedFile:
    try:
        return HashedFile(file, content_hash(file.url))
    except OSError as exc:  # vanished or unreadable right now: not quarantined, retried next run
        return HashedFile(file, None, f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class FilePlan:
    """What this run does with one inbox file.

    action: 'score' (chunks in `pending`), 'done_before', 'duplicate' (same bytes as another file in
    this run), 'quarantined' (now), 'quarantined_before', 'unreadable' (could not even be hashed).
    """

    name: str
    url: str
    sha256: str | None
    action: str
    reason: str | None = None
    out: str = ""
    n_rows: int = 0
    chunk_rows: int = 0
    n_chunks: int = 0
    pending: tuple[int, ...] = ()
    output_path: str | None = None
    rejects_path: str | None = None
    layout: FileLayout | None = None
    output_schema: pa.Schema | None = None

    def bounds(self, idx: int) -> tuple[int, int]:
        start = idx * self.chunk_rows
        return start, min(start + self.chunk_rows, self.n_rows)


def output_schema(input_schema: pa.Schema, prefix: str) -> tuple[pa.Schema, list[str]]:
    """Passthrough columns (renamed with `prefix` if they collide with ours) + the score columns."""
    taken = set(SCORE_COLUMNS)
    names = []
    for name in input_schema.names:
        new = name
        while new in taken:
            new = prefix + new
        taken.add(new)
        names.append(new)
    fields = [input_schema.field(i).with_name(n) for i, n in enumerate(names)]
    return pa.schema(fields + list(SCORE_SCHEMA)), names


def plan_files(
    hashed: list[HashedFile],
    out: Path,
    model: ModelRef,
    run_id: str,
    contract: ScoringContract,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    precision: str = DEFAULT_PRECISION,
) -> list[FilePlan]:
    """Decide, claim and quarantine, in one sequential pass (the only step that writes claims).

    A chunk is pending unless the ledger records it as scored by the pinned model in `precision`.
    """
    ledger = Ledger(out)
    day = datetime.now(UTC).date().isoformat()
    seen: dict[str, str] = {}
    plans: list[FilePlan] = []
    for item in hashed:
        file, sha = item.file, item.sha256
        if sha is None:
            plans.append(FilePlan(file.name, file.url, None, "unreadable", item.error, str(out)))
            continue
        if sha in seen:
            reason = f"same bytes as {seen[sha]}"
            plans.append(FilePlan(file.name, file.url, sha, "duplicate", reason, str(out)))
            continue
        seen[sha] = file.name
        record = ledger.file(sha)
        if record and record.status == "done":
            plans.append(FilePlan(file.name, file.url, sha, "done_before", record.output_path, str(out)))
            continue
        if record and record.status == "quarantined":
            plans.append(FilePlan(file.name, file.url, sha, "quarantined_before", record.reason, str(out)))
            continue
        try:
            layout = inspect_file(file.url, contract)
        except FileProblem as problem:
            ledger.quarantine(sha256=sha, name=file.name, size=file.size, reason=str(problem), run_id=run_id)
            plans.append(FilePlan(file.name, file.url, sha, "quarantined", str(problem), str(out)))
            continue
        schema, _ = output_schema(layout.schema, contract.reserved_prefix)
        rows_per_chunk = record.chunk_rows if record and record.chunk_rows else chunk_rows
        n_chunks = -(-layout.n_rows // rows_per_chunk)
        default_out, default_rejects = output_paths(out, file.name, sha, day)
        claimed = ledger.claim_file(
            sha256=sha,
            name=file.name,
            size=file.size,
            n_rows=layout.n_rows,
            chunk_rows=rows_per_chunk,
            n_chunks=n_chunks,
            day=day,
            output_path=str(default_out),
            rejects_path=str(default_rejects),
            model_name=model.name,
            model_version=model.version,
            run_id=run_id,
        )
        done = ledger.chunks(sha)
        pending = tuple(i for i in range(n_chunks) if not _scored_as(done.get(i), model, precision))
        plans.append(
            FilePlan(
                name=file.name,
                url=file.url,
                sha256=sha,
                action="score",
                out=str(out),
                n_rows=layout.n_rows,
                chunk_rows=rows_per_chunk,
                n_chunks=n_chunks,
                pending=pending,
                output_path=claimed.output_path,
                rejects_path=claimed.rejects_path,
                layout=layout,
                output_schema=schema,
            )
        )
    return plans


def _scored_as(record: ChunkRecord | None, model: ModelRef, precision: str) -> bool:
    """Whether a recorded chunk was scored by this pinned model in this precision."""
    return record is not None and (record.model_name, record.model_version, record.precision) == (
        model.name,
        model.version,
        precision,
    )


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


def score_chunk(
    plan: FilePlan,
    idx: int,
    model: ModelRef,
    run_id: str,
    contract: ScoringContract,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: int | None = None,
    backend: str = "auto",
    precision: str = DEFAULT_PRECISION,
) -> ChunkResult:
    """Read, validate, score and write chunk `idx` of a planned file, then record it in the ledger.

    `precision` is the run's resolved precision (`resolve_precision`). A worker that cannot run it
    natively (bf16 pinned by a driver with native bf16, on a worker without) fails the chunk rather
    than score it in another precision than the rest of the run.
    """
    assert plan.sha256 and plan.layout and plan.output_schema, "score_chunk needs a file planned to score"
    began = time.perf_counter()
    start, stop = plan.bounds(idx)
    try:
        table = read_chunk(plan.url, plan.layout, start, stop)
    except FileProblem as problem:
        return ChunkResult(plan.sha256, idx, problem=str(problem))
    checked = validate_rows(table, contract, start)
    predictor = load_pinned(model.local_dir, threads or default_threads(), backend, precision)
    if runnable_precision(precision, predictor.device) != precision:
        raise RuntimeError(
            f"this run is pinned to {precision}, but this worker ({predictor.device}) has no native "
            f"{precision}; run the workers on hardware that has it, or score with --precision fp32"
        )
    scores = score_columns(
        predictor, model, run_id, checked.text_a, checked.text_b, checked.cut, batch_size, precision=precision
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
    seconds = time.perf_counter() - began
    result = ChunkResult(
        plan.sha256,
        idx,
        rows_in=table.num_rows,
        rows_scored=scored.num_rows,
        rows_rejected=len(checked.rejects),
        rows_truncated=int(scores.column("truncated").to_numpy(zero_copy_only=False).sum()),
        seconds=seconds,
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


@dataclass(frozen=True)
class FileResult:
    """The outcome of one batch this run worked on."""

    name: str
    sha256: str
    status: str  # 'scored' | 'quarantined'
    rows_scored: int = 0
    rows_rejected: int = 0
    rows_truncated: int = 0
    output_path: str | None = None
    rejects_path: str | None = None
    reason: str | None = None


def finalize_file(
    plan: FilePlan,
    results: list[ChunkResult],
    model: ModelRef,
    run_id: str,
    precision: str = DEFAULT_PRECISION,
) -> FileResult:
    """Merge a batch's chunk parts into its output (and rejects) file and mark it done.

    Every chunk must be recorded in the ledger as scored by the pinned model in `precision`: the
    output then holds each input row exactly once, in input order, whichever run scored which chunk.
    """
    assert plan.sha256 and plan.output_path and plan.rejects_path and plan.output_schema
    out, ledger = Path(plan.out), Ledger(plan.out)
    problems = [r.problem for r in results if r.problem]
    if problems:
        ledger.quarantine(sha256=plan.sha256, name=plan.name, size=0, reason=problems[0], run_id=run_id)
        shutil.rmtree(staging_dir(out, plan.sha256), ignore_errors=True)
        return FileResult(plan.name, plan.sha256, "quarantined", reason=problems[0])
    done = ledger.chunks(plan.sha256)
    missing = [i for i in range(plan.n_chunks) if not _scored_as(done.get(i), model, precision)]
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
    ledger.file_done(plan.sha256, rows_scored=rows, rows_rejected=rejected, run_id=run_id)
    shutil.rmtree(staging_dir(out, plan.sha256), ignore_errors=True)
    return FileResult(
        plan.name,
        plan.sha256,
        "scored",
        rows_scored=rows,
        rows_rejected=rejected,
        rows_truncated=sum(done[i].rows_truncated for i in range(plan.n_chunks)),
        output_path=plan.output_path,
        rejects_path=rejects_path,
    )


@dataclass
class ScoreSummary:
    """What a run did, printed by the CLI and published as a Prefect artifact."""

    run_id: str
    model_name: str
    model_version: str
    precision: str = DEFAULT_PRECISION  # what every chunk of the run was scored in
    precision_requested: str = DEFAULT_PRECISION  # differs when bf16 fell back to fp32 (no native bf16)
    files_seen: int = 0
    files_scored: int = 0
    files_skipped: int = 0
    files_quarantined: int = 0
    rows_scored: int = 0
    rows_rejected: int = 0
    rows_truncated: int = 0
    rows_scored_this_run: int = 0
    scoring_seconds: float = 0.0
    pairs_per_s: float = 0.0
    files: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(
    run_id: str,
    model: ModelRef,
    plans: list[FilePlan],
    results: list[FileResult],
    chunk_results: list[ChunkResult],
    scoring_seconds: float,
    precision: str = DEFAULT_PRECISION,
    precision_requested: str | None = None,
) -> ScoreSummary:
    """Roll plans and results up into the run summary (one line per inbox file)."""
    by_sha = {r.sha256: r for r in results}
    summary = ScoreSummary(
        run_id,
        model.name,
        model.version,
        precision=precision,
        precision_requested=precision_requested or precision,
        files_seen=len(plans),
    )
    for plan in plans:
        result = by_sha.get(plan.sha256 or "") if plan.action == "score" else None
        if result is not None:
            status, detail = result.status, result.output_path or result.reason
        else:
            status, detail = plan.action, plan.reason
        if status == "scored":
            summary.files_scored += 1
            summary.rows_scored += result.rows_scored
            summary.rows_rejected += result.rows_rejected
            summary.rows_truncated += result.rows_truncated
        elif status == "quarantined":
            summary.files_quarantined += 1
        else:
            summary.files_skipped += 1
        summary.files.append({"file": plan.name, "status": status, "detail": detail})
    summary.rows_scored_this_run = sum(c.rows_scored for c in chunk_results)
    summary.scoring_seconds = round(scoring_seconds, 3)
    if scoring_seconds > 0:
        summary.pairs_per_s = round(summary.rows_scored_this_run / scoring_seconds, 1)
    return summary


def precision_note(summary: ScoreSummary) -> str:
    """One phrase saying what the run's precision means for its scores (console and artifact)."""
    if summary.precision_requested != summary.precision:
        return f"{summary.precision_requested} asked, no native {summary.precision_requested} here: fell back"
    if summary.precision == "bf16":
        return "opt-in bf16 autocast: scores differ from fp32, see docs/scoring.md"
    return "scores equal to fp32 reference"


def summary_markdown(summary: ScoreSummary) -> str:
    """The run summary as a markdown report (Prefect artifact, docs)."""
    lines = [
        f"# Nightly scoring run `{summary.run_id}`",
        "",
        f"Model: **{summary.model_name}** version **{summary.model_version}** (pinned for the whole run)",
        "",
        f"Precision: **{summary.precision}** ({precision_note(summary)})",
        "",
        "| files scored | skipped | quarantined | rows scored | rejected | truncated | pairs/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {summary.files_scored} | {summary.files_skipped} | {summary.files_quarantined} | "
        f"{summary.rows_scored} | {summary.rows_rejected} | {summary.rows_truncated} | "
        f"{summary.pairs_per_s} |",
        "",
        "| file | status | detail |",
        "|---|---|---|",
    ]
    for item in summary.files:
        detail = str(item["detail"] or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{item['file']}` | {item['status']} | {detail} |")
    return "\n".join(lines) + "\n"


def score_inbox(
    inbox: str,
    out: str | Path,
    model: str | ModelRef | None = None,
    home: Path | None = None,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: int | None = None,
    backend: str = "auto",
    precision: str = DEFAULT_PRECISION,
    lock_wait: float = 0.0,
    contract_path: Path | None = None,
    on_chunk_done: Callable[[ChunkResult], None] | None = None,
) -> ScoreSummary:
    """Score every new batch in `inbox` into `out`, sequentially in this process.

    `model` is resolved once, here, before the first chunk. `backend` is "auto" (ONNX Runtime on CPU when
    installed, else torch), "torch" or "onnx"
    (ONNX Runtime verified against torch at load; scores equal to ~1e-7). `precision` is "fp32" or the
    opt-in "bf16" (torch under bf16 autocast where bf16 is native, else fp32 with a warning; not with
    backend "onnx"), decided once here for every chunk. `on_chunk_done` is called after each
    chunk is recorded (progress bars; tests use it to promote a model mid-run).
    Raises `RunLocked` if another run holds `out` for longer than `lock_wait` seconds.
    """
    from simpair.settings import home_dir

    check_precision(precision, backend)
    out = Path(out).expanduser().resolve()
    contract = load_contract(contract_path)
    with run_lock(out, lock_wait):
        pinned = model if isinstance(model, ModelRef) else resolve_model_spec(model, home_dir(home))
        effective = resolve_precision(precision, backend)
        run_id = new_run_id()
        ledger = Ledger(out)
        ledger.start_run(run_id, pinned.name, pinned.version)
        hashed = [hash_file(f) for f in list_inbox(inbox)]
        plans = plan_files(hashed, out, pinned, run_id, contract, chunk_rows, effective)
        began = time.perf_counter()
        chunk_results: list[ChunkResult] = []
        file_results: list[FileResult] = []
        for plan in (p for p in plans if p.action == "score"):
            results = []
            for idx in plan.pending:
                result = score_chunk(
                    plan, idx, pinned, run_id, contract, batch_size, threads, backend, effective
                )
                results.append(result)
                if on_chunk_done:
                    on_chunk_done(result)
                if result.problem:
                    break
            chunk_results.extend(results)
            file_results.append(finalize_file(plan, results, pinned, run_id, effective))
        seconds = time.perf_counter() - began
        summary = summarize(run_id, pinned, plans, file_results, chunk_results, seconds, effective, precision)
        ledger.finish_run(run_id, summary.to_dict())
    return summary
