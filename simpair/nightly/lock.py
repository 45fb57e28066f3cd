"""One nightly at a time per pipeline home: a file lock that names its holder.

The lock is a file lock in the pipeline home, whatever started the night (cron, `simpair nightly`, a
Prefect worker); a deployment adds `concurrency_limit=1` on top for multi-machine set-ups.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout


class NightlyBusy(RuntimeError):
    """Another nightly run holds the lock of this pipeline home."""


def lock_path(home: Path) -> Path:
    return Path(home) / "nightly" / "nightly.lock"


@contextlib.contextmanager
def nightly_lock(home: Path, wait_seconds: float = 0.0) -> Iterator[Path]:
    """Hold the per-home nightly lock; NightlyBusy (naming the holder) if it stays taken `wait_seconds`."""
    path = lock_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = path.with_suffix(".holder")
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=wait_seconds)
    except Timeout as exc:
        who = holder.read_text().strip() if holder.exists() else "unknown process"
        raise NightlyBusy(
            f"another nightly run is in progress for {home} (held by {who}; lock {path}); "
            f"waited {wait_seconds:.0f}s. Exiting without doing anything."
        ) from exc
    try:
        since = datetime.now(UTC).isoformat(timespec="seconds")
        holder.write_text(f"pid {os.getpid()} on {socket.gethostname()} since {since}\n")
        yield path
    finally:
        holder.unlink(missing_ok=True)
        lock.release()
