"""The run lock of an output location, under `<out>/_ledger/`: one scoring run at a time per output."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from simpair.locks import holder_lock


class RunLocked(RuntimeError):
    """Another scoring run holds the lock on this output location."""


@contextmanager
def run_lock(out_dir: str | Path, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the exclusive run lock of an output location for the duration of a run.

    A crash never leaves a stale lock (`simpair.locks`). `wait_seconds=0` fails at once with a
    message naming the holder; a positive value waits that long first.
    """
    path = Path(out_dir) / "_ledger" / "run.lock"

    def busy(holder: str) -> RunLocked:
        return RunLocked(
            f"another scoring run holds {path} ({holder}); "
            f"waited {wait_seconds:g}s. Re-run later or pass a longer wait."
        )

    with holder_lock(path, path.with_name("run.lock.holder"), wait_seconds, busy):
        yield
