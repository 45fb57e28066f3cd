"""One nightly at a time per pipeline home: a file lock that names its holder.

The lock is a file lock in the pipeline home, whatever started the night (cron, `simpair nightly`, a
Prefect worker); a deployment adds `concurrency_limit=1` on top for multi-machine set-ups. The lock
itself is `simpair.locks.holder_lock`, the one the scoring run lock uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from simpair.locks import holder_lock


class NightlyBusy(RuntimeError):
    """Another nightly run holds the lock of this pipeline home."""


def lock_path(home: Path) -> Path:
    return Path(home) / "nightly" / "nightly.lock"


@contextlib.contextmanager
def nightly_lock(home: Path, wait_seconds: float = 0.0) -> Iterator[Path]:
    """Hold the per-home nightly lock; NightlyBusy (naming the holder) if it stays taken `wait_seconds`."""
    path = lock_path(home)

    def busy(who: str) -> NightlyBusy:
        return NightlyBusy(
            f"another nightly run is in progress for {home} (held by {who}; lock {path}); "
            f"waited {wait_seconds:.0f}s. Exiting without doing anything."
        )

    with holder_lock(path, path.with_suffix(".holder"), wait_seconds, busy):
        yield path
