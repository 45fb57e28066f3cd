"""Parts and row groups written on a second thread: in submission order, bounded, errors not lost."""

from __future__ import annotations

import threading
import time

import pytest

from simpair.ingest.background import BackgroundWrites


def test_writes_run_in_order_on_one_thread_with_a_bound() -> None:
    done: list[int] = []
    threads: set[int] = set()
    waiting: list[int] = []

    def write(i: int) -> None:
        time.sleep(0.01)
        threads.add(threading.get_ident())
        done.append(i)

    with BackgroundWrites(limit=2) as writes:
        for i in range(8):
            writes.submit(write, i)
            waiting.append(len(writes._pending))
    assert done == list(range(8))
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert max(waiting) <= 2


def test_a_failed_write_is_raised_and_nothing_is_left_running() -> None:
    done: list[int] = []

    def write(i: int) -> None:
        if i == 1:
            raise OSError("disk full")
        time.sleep(0.01)
        done.append(i)

    writes = BackgroundWrites(limit=4)
    writes.submit(write, 0)
    writes.submit(write, 1)
    writes.submit(write, 2)
    with pytest.raises(OSError, match="disk full"):
        writes.close()
    assert writes._pool._shutdown
    count = len(done)
    time.sleep(0.05)
    assert len(done) == count  # no write runs after close returned
