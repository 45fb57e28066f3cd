"""Run planning: hash the inbox files, decide each file's fate and claim the work in the ledger.

`hash_file` runs per file (parallel, read-only); `plan_files` is the one sequential pass that checks
the ledger, reads footers, quarantines what cannot be scored and claims the rest, with the chunks
still to do (all of them, or those a crashed run did not finish, or those a different model version
or precision scored). `output_schema` fixes the scored file's columns at planning time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from simpair.model_ref import ModelRef
from simpair.scoring.contract import ScoringContract
from simpair.scoring.inbox import InboxFile, content_hash
from simpair.scoring.ledger import ChunkRecord, Ledger
from simpair.scoring.options import DEFAULT_CHUNK_ROWS, DEFAULT_PRECISION
from simpair.scoring.reader import FileLayout, FileProblem, inspect_file
from simpair.scoring.scorer import SCORE_COLUMNS, SCORE_SCHEMA
from simpair.scoring.writer import output_paths


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


def scored_as(record: ChunkRecord | None, model: ModelRef, precision: str) -> bool:
    """Whether a recorded chunk was scored by this pinned model in this precision."""
    return record is not None and (record.model_name, record.model_version, record.precision) == (
        model.name,
        model.version,
        precision,
    )


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
            )
        )
    return plans
