"""Run jobs side by side: at most `jobs` at once, a freed slot taking the next job at once.

Waves of `jobs` would wait for their slowest member before the next starts; trainings of one stack
differ by 2x in length (a cross-encoder ~8 min, an ungrouped bi-encoder ~16 min here), so a freed
slot is refilled at once instead. Results come back in submission order whatever order the runs end
in. A failed run stops new submissions; the runs already going are waited for (none is left training
behind the caller's back), then the failure is raised.

The scheduler knows nothing of what runs the jobs: the caller gives `start` (returns a future) and
how to wait for futures. `executor_side_by_side` fills these in for `concurrent.futures` (worker
processes, `simpair stack --jobs`); `simpair.tasks.side_by_side` for Prefect task runs (the nightly).
"""

from __future__ import annotations

import concurrent.futures
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

F = TypeVar("F")
R = TypeVar("R")


def side_by_side(
    start: Callable[[int, int], F],
    count: int,
    jobs: int,
    first_done: Callable[[Sequence[F]], F],
    wait_all: Callable[[Sequence[F]], Any],
    result: Callable[[F], R],
    on_start: Callable[[int], None] | None = None,
    on_failure: Callable[[int, BaseException], BaseException] | None = None,
) -> list[R]:
    """`result(start(i, slot))` for i in 0 .. count-1, `jobs` running at once; results in index order.

    `slot` is 0 .. jobs-1, never shared by two runs going at the same time (e.g. the terminal line of
    a progress bar). `first_done` returns one finished future of those given (blocking until one is);
    `wait_all` blocks until all given have finished. On a failure the runs going are waited for, then
    the failure is raised, or `on_failure(index, error)` raised from it when given.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    waiting = deque(range(count))
    running: list[tuple[F, int, int]] = []  # (future, index, slot)
    results: dict[int, R] = {}
    while waiting or running:
        while waiting and len(running) < jobs:
            index = waiting.popleft()
            slot = min(set(range(jobs)) - {s for _, _, s in running})
            if on_start is not None:
                on_start(index)
            running.append((start(index, slot), index, slot))
        finished = first_done([future for future, _, _ in running])
        index = next(i for future, i, _ in running if future is finished)
        running = [entry for entry in running if entry[0] is not finished]
        try:
            results[index] = result(finished)
        except BaseException as exc:
            waiting.clear()
            wait_all([future for future, _, _ in running])
            if on_failure is None:
                raise
            raise on_failure(index, exc) from exc
    return [results[i] for i in range(count)]


def _first_done(futures: Sequence[concurrent.futures.Future[Any]]) -> concurrent.futures.Future[Any]:
    done = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED).done
    return next(future for future in futures if future in done)


def executor_side_by_side(
    executor: concurrent.futures.Executor,
    fn: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    jobs: int,
    on_failure: Callable[[int, BaseException], BaseException] | None = None,
) -> list[R]:
    """`fn(*calls[i])` on `executor` for every i, `jobs` at once; results in `calls` order."""
    return side_by_side(
        lambda index, _slot: executor.submit(fn, *calls[index]),
        len(calls),
        jobs,
        first_done=_first_done,
        wait_all=concurrent.futures.wait,
        result=lambda future: future.result(),
        on_failure=on_failure,
    )
