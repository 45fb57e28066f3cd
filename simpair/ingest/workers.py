"""The process pool that parses the chunks of large delimited files on every core.

One pool per process, started on first need and reused by every file and source after it (its
workers import polars and pyarrow once, about a second each). It uses `spawn`: polars' thread pool
does not survive `fork`. This module imports no polars, so a worker can limit polars' threads before
polars loads. Inside a daemonic process (a Dask worker, say) no pool can be started; the
chunks are then parsed in the calling process, as they are when `workers` is 1.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
from concurrent.futures import Executor, ProcessPoolExecutor

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_size = 0


def default_workers() -> int:
    """$SIMPAIR_INGEST_WORKERS, else 1 (the calling process parses).

    On 2 cores a pool of 2 saved 4% of the wall time of a 2M-row ingest (18.9 s against 19.6 s,
    2026-11-26), for two more processes and their memory, so it is opt-in.
    """
    value = os.environ.get("SIMPAIR_INGEST_WORKERS")
    return max(1, int(value)) if value else 1


def pool(workers: int) -> Executor | None:
    """A pool of `workers` processes, or None where chunks are better parsed in this process."""
    global _pool, _size
    if workers <= 1 or multiprocessing.current_process().daemon:
        return None
    with _lock:
        if _pool is None or _size != workers:
            if _pool is not None:
                _pool.shutdown(wait=True)
            _pool = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread
            )
            _size = workers
        return _pool


def _one_thread() -> None:
    """Runs in each worker before polars loads: the workers already fill the cores, one thread each."""
    os.environ["POLARS_MAX_THREADS"] = "1"


def discard() -> None:
    """Forget a pool that broke (a worker was killed): the next file starts a fresh one."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


@atexit.register
def _shutdown() -> None:
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)
