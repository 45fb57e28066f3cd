"""Run planning: hash the inbox files, decide each file's fate and claim the work in the ledger.

`hash_file` runs per file (parallel, read-only); `plan_files` is the one sequential pass that checks
the ledger, reads footers, quarantines what cannot be scored and claims the rest, with the chunks
still to do (all of them, or those a crashed run did not finish, or those a different model version
or precision scored). `output_schema` fixes the scored file's columns at planning time.

A batch is done once per model version: one that another version scored is skipped unless the run's
`Rescore` window covers it (`simpair.scoring.rescore`); then it is claimed as a re-score, with its
own output under `_rescored/<model>/<version>/`, and its first output stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from simpair.runtime.model_ref import ModelRef
from simpair.scoring.contract import ScoringContract
from simpair.scoring.inbox import InboxFile, content_hash
from simpair.scoring.ledger import Ledger
from simpair.scoring.options import DEFAULT_CHUNK_ROWS
from simpair.scoring.reader import FileLayout, FileProblem, inspect_file
from simpair.scoring.records import ChunkRecord, FileRecord, Scoring
from simpair.scoring.rescore import Rescore
from simpair.scoring.scorer import SCORE_COLUMNS, SCORE_SCHEMA
from simpair.scoring.writer import output_paths, rescore_paths
from simpair.stages import step


@dataclass(frozen=True)
class HashedFile:
    """An inbox file and its content hash (None, with `error`, if it could not be read at all)."""

    file: InboxFile
    sha256: str | None
    error: str | None = None


@step("hash-file", run_name="hash-{file.name}")
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
    `rescore`: a 'score' of a batch another model version already scored (its own ledger row and output).
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
    rescore: bool = False

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


def scored_as(record: ChunkRecord | None, model: ModelRef, precision: str) -> bool:
    """Whether a recorded chunk was scored by this pinned model in this precision."""
    return record is not None and (record.model_name, record.model_version, record.precision) == (
        model.name,
        model.version,
        precision,
    )


@step("plan-files")
def plan_files(
    hashed: list[HashedFile],
    out: Path,
    model: ModelRef,
    run_id: str,
    contract: ScoringContract,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    precision: str = "fp32",  # the run's resolved precision (never auto)
    rescore: Rescore | None = None,
) -> list[FilePlan]:
    """Decide, claim and quarantine, in one sequential pass (the only step that writes claims).

    A chunk is pending unless the ledger records it as scored by the pinned model in `precision`.
    A batch done by the pinned version is skipped; one done by another version only outside `rescore`.
    A re-score a crashed run left unfinished is taken up again whatever this run's window.
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
        if record and record.status == "quarantined":
            plans.append(FilePlan(file.name, file.url, sha, "quarantined_before", record.reason, str(out)))
            continue
        scorings = ledger.scorings(sha)
        mine = next((s for s in scorings if s.key == (model.name, model.version)), None)
        if mine and mine.status == "done":
            plans.append(FilePlan(file.name, file.url, sha, "done_before", mine.output_path, str(out)))
            continue
        if mine and mine.status == "quarantined":
            plans.append(FilePlan(file.name, file.url, sha, "quarantined_before", mine.reason, str(out)))
            continue
        done_by = [s for s in scorings if s.status == "done"]  # other versions
        day_first = record.day if record else None
        again = bool(mine and not mine.first) or bool(done_by and rescore and rescore.covers(day_first))
        if done_by and not again:
            plans.append(FilePlan(file.name, file.url, sha, "done_before", done_by[0].output_path, str(out)))
            continue
        try:
            layout = inspect_file(file.url, contract)
        except FileProblem as problem:
            if again:  # the batch's other scorings stay done
                _claim_rescore(ledger, record, file.name, sha, out, model, run_id, day)
                ledger.rescore_quarantined(sha, model.name, model.version, reason=str(problem), run_id=run_id)
            else:
                ledger.quarantine(
                    sha256=sha, name=file.name, size=file.size, reason=str(problem), run_id=run_id
                )
            plans.append(FilePlan(file.name, file.url, sha, "quarantined", str(problem), str(out)))
            continue
        schema, _ = output_schema(layout.schema, contract.reserved_prefix)
        rows_per_chunk = record.chunk_rows if record and record.chunk_rows else chunk_rows
        n_chunks = -(-layout.n_rows // rows_per_chunk)
        if again:
            claimed = _claim_rescore(ledger, record, file.name, sha, out, model, run_id, day)
        else:
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
        pending = tuple(i for i in range(n_chunks) if not scored_as(done.get(i), model, precision))
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
                rescore=again,
            )
        )
    return plans


def _claim_rescore(
    ledger: Ledger, record: FileRecord | None, name: str, sha: str, out: Path, model: ModelRef, run_id: str,
    today: str,
) -> Scoring:  # fmt: skip
    """Claim a re-score: output under the version's own tree, on the day the batch was first claimed."""
    day = record.day if record and record.day else today
    scored, rejects = rescore_paths(out, model.name, model.version, name, sha, day)
    return ledger.claim_rescore(
        sha256=sha, model_name=model.name, model_version=model.version, output_path=str(scored),
        rejects_path=str(rejects), run_id=run_id,
    )  # fmt: skip
