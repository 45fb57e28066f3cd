"""An exclusive OS file lock that names its holder: one run at a time per output, or per home.

An OS file lock (fcntl/LockFile via `filelock`): the kernel drops it when its holder dies, even by
SIGKILL, so a crash never leaves a stale lock. The holder (pid, host, since when) is written beside
it, so a run turned away can say who holds the lock.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import filelock


@contextmanager
def holder_lock(
    path: Path, holder: Path, wait_seconds: float, busy: Callable[[str], Exception]
) -> Iterator[None]:
    """Hold the lock at `path` (its holder written to `holder`) for the `with` block.

    `wait_seconds=0` gives up at once; when the lock stays taken, `busy(who holds it)` is raised.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path))
    try:
        lock.acquire(timeout=max(wait_seconds, 0.0), poll_interval=0.2)
    except filelock.Timeout:
        who = holder.read_text(encoding="utf-8").strip() if holder.exists() else "unknown"
        raise busy(who) from None
    try:
        since = datetime.now(UTC).isoformat(timespec="seconds")
        holder.write_text(f"pid {os.getpid()} on {socket.gethostname()} since {since}\n", encoding="utf-8")
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()
