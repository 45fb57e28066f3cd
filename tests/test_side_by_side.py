"""Side-by-side runs: `submit_side_by_side` on real Prefect tasks refills a freed slot at once and
keeps result order; training worker processes each own a progress-bar line."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import pytest
from prefect import flow, task

from simpair.tasks.side_by_side import submit_side_by_side
from simpair.training.progress_slot import current_slot
from simpair.training.workers import worker_pool

_starts: dict[str, float] = {}
_lock = threading.Lock()


@task
def nap(name: str, seconds: float, fail: bool = False, slot: int | None = None) -> tuple[str, float, float]:
    start = time.monotonic()
    with _lock:
        _starts[name] = start
        _slots[name] = slot
    time.sleep(seconds)
    if fail:
        raise RuntimeError(f"{name} failed")
    return name, start, time.monotonic()


_slots: dict[str, int | None] = {}


def _overlap(spans: list[tuple[str, float, float]]) -> int:
    """Most runs going at one instant."""
    edges = sorted([(s, 1) for _, s, _ in spans] + [(e, -1) for _, _, e in spans])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def test_a_freed_slot_takes_the_next_run_without_waiting_for_the_slowest() -> None:
    calls = [
        {"name": "slow", "seconds": 3.0},
        {"name": "quick-1", "seconds": 0.2},
        {"name": "quick-2", "seconds": 0.2},
        {"name": "quick-3", "seconds": 0.2},
    ]

    @flow
    def run() -> list[tuple[str, float, float]]:
        return submit_side_by_side(nap, calls, jobs=2, slot_argument="slot")

    spans = run()
    assert [name for name, _, _ in spans] == ["slow", "quick-1", "quick-2", "quick-3"]
    slow_end = spans[0][2]
    # waves of two would start quick-2 only after slow ends (3 s); a refilled slot starts it at ~0.2 s
    assert all(start < slow_end - 1.0 for _, start, _ in spans[1:])
    assert _overlap(spans) <= 2
    # the slow run keeps slot 0 throughout; the quick ones, each running beside it, get slot 1
    assert [_slots[name] for name, _, _ in spans] == [0, 1, 1, 1]


def test_a_failure_stops_new_runs_and_waits_for_the_ones_going() -> None:
    _starts.clear()
    calls = [
        {"name": "long", "seconds": 1.5},
        {"name": "broken", "seconds": 0.1, "fail": True},
        {"name": "never", "seconds": 0.1},
    ]
    ended: list[float] = []

    @flow
    def run() -> None:
        try:
            submit_side_by_side(nap, calls, jobs=2)
        finally:
            ended.append(time.monotonic())

    with pytest.raises(RuntimeError, match="broken failed"):
        run()
    assert "never" not in _starts
    assert ended[0] >= _starts["long"] + 1.5  # the running one finished before the error surfaced


def test_jobs_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="jobs must be 1 or more"):
        submit_side_by_side(nap, [{"name": "x", "seconds": 0}], jobs=0)


def _slot_after_meeting(barrier: Any) -> int | None:
    barrier.wait(timeout=60)  # both workers are busy at once, so two distinct processes answer
    return current_slot()


def test_each_training_worker_process_draws_on_its_own_line() -> None:
    with multiprocessing.get_context("spawn").Manager() as manager:
        barrier = manager.Barrier(2)
        with worker_pool(2) as pool:
            slots = [pool.submit(_slot_after_meeting, barrier) for _ in range(2)]
            assert sorted(f.result(timeout=120) for f in slots) == [0, 1]


def _nap_plain(name: str, seconds: float, fail: bool = False) -> tuple[str, float, float]:
    start = time.monotonic()
    with _lock:
        _starts[name] = start
    time.sleep(seconds)
    if fail:
        raise RuntimeError(f"{name} failed")
    return name, start, time.monotonic()


def test_the_command_lines_executor_path_uses_the_same_scheduler() -> None:
    """`simpair stack --jobs` (worker processes) and the flow (Prefect tasks) share one scheduler:
    the same refill, order and failure rules, here on threads for speed."""
    from concurrent.futures import ThreadPoolExecutor

    from simpair.training.side_by_side import executor_side_by_side

    calls = [("slow", 1.5), ("quick-1", 0.1), ("quick-2", 0.1), ("quick-3", 0.1)]
    with ThreadPoolExecutor(4) as pool:  # more threads than jobs: the scheduler alone keeps it at 2
        spans = executor_side_by_side(pool, _nap_plain, calls, jobs=2)
    assert [name for name, _, _ in spans] == ["slow", "quick-1", "quick-2", "quick-3"]
    assert all(start < spans[0][2] - 0.5 for _, start, _ in spans[1:])
    assert _overlap(spans) <= 2

    _starts.clear()
    ended: list[float] = []
    failing = [("long", 1.0, False), ("broken", 0.05, True), ("never", 0.05, False)]
    with ThreadPoolExecutor(2) as pool, pytest.raises(ValueError, match="member 1: broken failed"):
        try:
            executor_side_by_side(
                pool, _nap_plain, failing, jobs=2, on_failure=lambda i, exc: ValueError(f"member {i}: {exc}")
            )
        finally:
            ended.append(time.monotonic())
    assert "never" not in _starts
    assert ended[0] >= _starts["long"] + 1.0
