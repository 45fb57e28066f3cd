"""Whether the model registry holds a model's versions, told without importing MLflow when it can be.

A command that needs a registered model asks this first: on a fresh home the embedded SQLite store
does not exist yet, or holds no version, and the command can say at once how to get a model instead
of spending seconds importing MLflow (and starting Prefect) to find out. Only the embedded store is
read, read-only, through `sqlite3`; for a tracking server or an unreadable file the answer is
"unknown" and the caller asks MLflow as before.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

# MLflow's SQL store marks a deleted version with this stage instead of removing its row
_DELETED_STAGE = "Deleted_Internal"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///...` tracking URI; None for any other kind of store."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0])


def registered_versions(uri: str, name: str) -> int | None:
    """How many live versions of `name` the store at `uri` holds; None when that needs MLflow itself.

    A SQLite file that does not exist, or that has no registry tables yet, holds none (0).
    """
    path = sqlite_path(uri)
    if path is None:
        return None
    if not path.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "model_versions" not in tables:
                return 0
            (count,) = db.execute(
                "SELECT COUNT(*) FROM model_versions WHERE name = ? AND current_stage != ?",
                (name, _DELETED_STAGE),
            ).fetchone()
    except sqlite3.Error:  # locked, another schema, not a database: let MLflow answer
        return None
    return int(count)
