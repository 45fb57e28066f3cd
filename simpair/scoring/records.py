"""The ledger's tables and its rows as typed records (`simpair.scoring.ledger` reads and writes them).

A batch (`FileRecord`, one row of `files`), a finished chunk (`ChunkRecord`), and one scoring of a
batch by one model version (`Scoring`: its first, from `files`, or a re-score from `rescores`).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    size INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'quarantined')),
    reason TEXT,
    n_rows INTEGER,
    chunk_rows INTEGER,
    n_chunks INTEGER,
    day TEXT,
    output_path TEXT,
    rejects_path TEXT,
    model_name TEXT,
    model_version TEXT,
    run_id TEXT,
    rows_scored INTEGER,
    rows_rejected INTEGER,
    first_seen TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    sha256 TEXT NOT NULL,
    idx INTEGER NOT NULL,
    rows_in INTEGER NOT NULL,
    rows_scored INTEGER NOT NULL,
    rows_rejected INTEGER NOT NULL,
    rows_truncated INTEGER NOT NULL,
    model_name TEXT NOT NULL,
    model_version TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seconds REAL NOT NULL,
    updated_at TEXT NOT NULL,
    precision TEXT,
    PRIMARY KEY (sha256, idx)
);
CREATE TABLE IF NOT EXISTS rescores (
    sha256 TEXT NOT NULL,
    model_name TEXT NOT NULL,
    model_version TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'quarantined')),
    reason TEXT,
    output_path TEXT NOT NULL,
    rejects_path TEXT NOT NULL,
    run_id TEXT,
    rows_scored INTEGER,
    rows_rejected INTEGER,
    first_seen TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (sha256, model_name, model_version)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    model_name TEXT,
    model_version TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    summary_json TEXT
);
"""


@dataclass(frozen=True)
class FileRecord:
    """One row of `files`."""

    sha256: str
    name: str
    size: int
    status: str
    reason: str | None
    n_rows: int | None
    chunk_rows: int | None
    n_chunks: int | None
    day: str | None
    output_path: str | None
    rejects_path: str | None
    model_name: str | None
    model_version: str | None
    run_id: str | None
    rows_scored: int | None
    rows_rejected: int | None
    first_seen: str
    updated_at: str


@dataclass(frozen=True)
class ChunkRecord:
    """One finished chunk: its counts and the model version and precision that scored it.

    `precision` is None for chunks recorded by a ledger from before precision was tracked; their
    staged parts lack the `precision` column, so a resumed run scores them again.
    """

    idx: int
    rows_in: int
    rows_scored: int
    rows_rejected: int
    rows_truncated: int
    model_name: str
    model_version: str
    run_id: str
    seconds: float
    precision: str | None = None


@dataclass(frozen=True)
class Scoring:
    """One scoring of a batch by one model version: its first (from `files`) or a re-score.

    `first` is True for the batch's first scoring, whose output lives in the top-level `date=` layout.
    """

    sha256: str
    model_name: str
    model_version: str
    status: str
    output_path: str | None
    rejects_path: str | None
    rows_scored: int | None
    rows_rejected: int | None
    run_id: str | None
    reason: str | None
    first: bool

    @property
    def key(self) -> tuple[str, str]:
        return self.model_name, self.model_version
