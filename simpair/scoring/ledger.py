"""The exactly-once ledger under `<out>/_ledger/` (its run lock is `simpair.scoring.lock`).

SQLite in WAL mode: several worker processes (a Dask cluster on one machine) record finished
chunks concurrently, readers never block the writer, and a SIGKILLed process leaves every
committed row intact. Rows are keyed by the input file's content hash, so identity follows bytes,
not names. A chunk is recorded as done only after its output part has been atomically renamed into
place; a crash between the two just redoes that chunk, overwriting the same part path.

Scorings are keyed by (batch, model name, model version). A batch's first scoring lives in its
`files` row, as in every ledger written before re-scoring existed: a `done` row counts as done by the
version it records, so an old ledger is read as it is, with no migration. Each later scoring by
another version (`simpair score --rescore`) gets its own `rescores` row and its own output file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from simpair.scoring.records import SCHEMA, ChunkRecord, FileRecord, Scoring


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _add_column(conn: sqlite3.Connection, table: str, column: str, decl: str) -> None:
    """Upgrade a ledger written by an older version in place (new columns are NULL in old rows)."""
    if column in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
        return
    try:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
    except sqlite3.OperationalError as exc:  # another worker process added it a moment ago
        if "duplicate column" not in str(exc):
            raise


class Ledger:
    """The ledger database of one output location. Opens a short-lived connection per call,
    so an instance can be pickled to worker processes."""

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir) / "_ledger"
        self.path = self.dir / "ledger.sqlite"
        self.dir.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=60)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
            _add_column(conn, "chunks", "precision", "TEXT")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path, timeout=60, isolation_level=None)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=60000")
            conn.row_factory = sqlite3.Row
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # files ------------------------------------------------------------------------------------

    def file(self, sha256: str) -> FileRecord | None:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM files WHERE sha256 = ?", (sha256,)).fetchone()
        return FileRecord(**dict(row)) if row else None

    def files(self) -> list[FileRecord]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM files ORDER BY first_seen, name").fetchall()
        return [FileRecord(**dict(row)) for row in rows]

    def claim_file(
        self,
        *,
        sha256: str,
        name: str,
        size: int,
        n_rows: int,
        chunk_rows: int,
        n_chunks: int,
        day: str,
        output_path: str,
        rejects_path: str,
        model_name: str,
        model_version: str,
        run_id: str,
    ) -> FileRecord:
        """Mark a file as being scored. A file resumed from a crashed run keeps its chunking and
        output paths from the first claim, so parts written before the crash stay valid."""
        now = _now()
        with self._connect() as conn:
            conn.execute(
                """INSERT INTO files (sha256, name, size, status, n_rows, chunk_rows, n_chunks, day,
                       output_path, rejects_path, model_name, model_version, run_id, first_seen, updated_at)
                   VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (sha256) DO UPDATE SET status = 'running', reason = NULL, name = excluded.name,
                       model_name = excluded.model_name, model_version = excluded.model_version,
                       run_id = excluded.run_id, updated_at = excluded.updated_at""",
                (sha256, name, size, n_rows, chunk_rows, n_chunks, day, output_path, rejects_path,
                 model_name, model_version, run_id, now, now),
            )  # fmt: skip
            row = conn.execute("SELECT * FROM files WHERE sha256 = ?", (sha256,)).fetchone()
        return FileRecord(**dict(row))

    def quarantine(self, *, sha256: str, name: str, size: int, reason: str, run_id: str) -> None:
        """Record a file that cannot be scored. Same bytes are never retried; new bytes are a new key."""
        now = _now()
        with self._connect() as conn:
            conn.execute(
                """INSERT INTO files (sha256, name, size, status, reason, run_id, first_seen, updated_at)
                   VALUES (?, ?, ?, 'quarantined', ?, ?, ?, ?)
                   ON CONFLICT (sha256) DO UPDATE SET status = 'quarantined', reason = excluded.reason,
                       run_id = excluded.run_id, updated_at = excluded.updated_at""",
                (sha256, name, size, reason, run_id, now, now),
            )
            conn.execute("DELETE FROM chunks WHERE sha256 = ?", (sha256,))

    def file_done(self, sha256: str, *, rows_scored: int, rows_rejected: int, run_id: str) -> None:
        with self._connect() as conn:
            conn.execute(
                """UPDATE files SET status = 'done', rows_scored = ?, rows_rejected = ?, run_id = ?,
                       updated_at = ? WHERE sha256 = ?""",
                (rows_scored, rows_rejected, run_id, _now(), sha256),
            )

    # scorings by model version ------------------------------------------------------------

    def scorings(self, sha256: str) -> list[Scoring]:
        """Every scoring of a batch, the first one first: its `files` row (when a model scored or is
        scoring it) and its `rescores` rows. Reads ledgers from before re-scoring unchanged."""
        with self._connect() as conn:
            first = conn.execute("SELECT * FROM files WHERE sha256 = ?", (sha256,)).fetchone()
            rows = conn.execute(
                "SELECT * FROM rescores WHERE sha256 = ? ORDER BY first_seen", (sha256,)
            ).fetchall()
        found = []
        if first is not None and first["model_name"] and first["model_version"]:
            found.append(
                Scoring(
                    sha256, first["model_name"], first["model_version"], first["status"],
                    first["output_path"], first["rejects_path"], first["rows_scored"], first["rows_rejected"],
                    first["run_id"], first["reason"], first=True,
                )
            )  # fmt: skip
        for row in rows:
            fields = {k: row[k] for k in row.keys() if k not in ("first_seen", "updated_at")}  # noqa: SIM118
            found.append(Scoring(**fields, first=False))
        return found

    def claim_rescore(
        self, *, sha256: str, model_name: str, model_version: str, output_path: str, rejects_path: str,
        run_id: str,
    ) -> Scoring:  # fmt: skip
        """Mark a batch as being scored again by another model version; a resumed claim keeps its paths."""
        now = _now()
        with self._connect() as conn:
            conn.execute(
                """INSERT INTO rescores (sha256, model_name, model_version, status, output_path,
                       rejects_path, run_id, first_seen, updated_at)
                   VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)
                   ON CONFLICT (sha256, model_name, model_version) DO UPDATE SET status = 'running',
                       reason = NULL, run_id = excluded.run_id, updated_at = excluded.updated_at""",
                (sha256, model_name, model_version, output_path, rejects_path, run_id, now, now),
            )
        return next(s for s in self.scorings(sha256) if not s.first and s.key == (model_name, model_version))

    def rescore_done(
        self, sha256: str, model_name: str, model_version: str, *, rows_scored: int, rows_rejected: int,
        run_id: str,
    ) -> None:  # fmt: skip
        with self._connect() as conn:
            conn.execute(
                """UPDATE rescores SET status = 'done', rows_scored = ?, rows_rejected = ?, run_id = ?,
                       updated_at = ? WHERE sha256 = ? AND model_name = ? AND model_version = ?""",
                (rows_scored, rows_rejected, run_id, _now(), sha256, model_name, model_version),
            )

    def rescore_quarantined(
        self, sha256: str, model_name: str, model_version: str, *, reason: str, run_id: str
    ) -> None:
        """A re-score that hit bad data: recorded on its own row; the batch's other scorings stay done."""
        with self._connect() as conn:
            conn.execute(
                """UPDATE rescores SET status = 'quarantined', reason = ?, run_id = ?, updated_at = ?
                   WHERE sha256 = ? AND model_name = ? AND model_version = ?""",
                (reason, run_id, _now(), sha256, model_name, model_version),
            )
            conn.execute("DELETE FROM chunks WHERE sha256 = ?", (sha256,))

    # chunks -----------------------------------------------------------------------------------

    def chunk_done(self, sha256: str, record: ChunkRecord) -> None:
        with self._connect() as conn:
            conn.execute(
                """INSERT OR REPLACE INTO chunks (sha256, idx, rows_in, rows_scored, rows_rejected,
                       rows_truncated, model_name, model_version, run_id, seconds, updated_at, precision)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (sha256, record.idx, record.rows_in, record.rows_scored, record.rows_rejected,
                 record.rows_truncated, record.model_name, record.model_version, record.run_id,
                 record.seconds, _now(), record.precision),
            )  # fmt: skip

    def chunks(self, sha256: str) -> dict[int, ChunkRecord]:
        with self._connect() as conn:
            rows = conn.execute(
                """SELECT idx, rows_in, rows_scored, rows_rejected, rows_truncated, model_name,
                       model_version, run_id, seconds, precision FROM chunks WHERE sha256 = ?
                   ORDER BY idx""",
                (sha256,),
            ).fetchall()
        return {row["idx"]: ChunkRecord(**dict(row)) for row in rows}

    # runs -------------------------------------------------------------------------------------

    def start_run(self, run_id: str, model_name: str, model_version: str) -> None:
        """Open a run; any other run still 'running' died without finishing (we hold the lock)."""
        with self._connect() as conn:
            conn.execute("UPDATE runs SET status = 'crashed' WHERE status = 'running'")
            conn.execute(
                "INSERT OR REPLACE INTO runs (run_id, status, model_name, model_version, started_at) "
                "VALUES (?, 'running', ?, ?, ?)",
                (run_id, model_name, model_version, _now()),
            )

    def last_finished_version(self, model_name: str) -> str | None:
        """The model version the latest finished run of `model_name` on this output scored with."""
        with self._connect() as conn:
            row = conn.execute(
                """SELECT model_version FROM runs WHERE status = 'finished' AND model_name = ?
                   ORDER BY finished_at DESC, rowid DESC LIMIT 1""",
                (model_name,),
            ).fetchone()
        return row["model_version"] if row else None

    def finish_run(self, run_id: str, summary: dict) -> None:
        with self._connect() as conn:
            conn.execute(
                "UPDATE runs SET status = 'finished', finished_at = ?, summary_json = ? WHERE run_id = ?",
                (_now(), json.dumps(summary, default=str), run_id),
            )
