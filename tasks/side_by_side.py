"""Submit one Prefect task per argument set, at most `jobs` running at a time.

Waves of `jobs` wait for their slowest member before the next starts; trainings of one stack differ
by 2x in length (a cross-encoder ~8 min, an ungrouped bi-encoder ~16 min here), so a freed slot is
refilled at once instead. Results come back in argument order whatever order the runs end in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from prefect import Task
from prefect.futures import PrefectFuture, as_completed, wait

R = TypeVar("R")


def submit_side_by_side(
    task: Task[..., R],
    calls: Sequence[dict[str, Any]],
    jobs: int,
    on_start: Callable[[int], None] | None = None,
    slot_argument: str | None = None,
) -> list[R]:
    """`task(**calls[i])` for every i, `jobs` at once; results in `calls` order.

    `slot_argument` names a keyword that receives the run's slot, 0 .. jobs-1, which no two runs
    going at the same time share (e.g. the terminal line of its progress bar).
    A failed run stops new submissions; the runs already going are waited for (so none is left
    training behind the flow's back), then the first failure is raised.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    waiting = deque(enumerate(calls))
    running: list[tuple[PrefectFuture[R], int, int]] = []  # (future, call index, slot)
    results: dict[int, R] = {}
    while waiting or running:
        while waiting and len(running) < jobs:
            index, kwargs = waiting.popleft()
            slot = min(set(range(jobs)) - {s for _, _, s in running})
            if on_start is not None:
                on_start(index)
            extra = {slot_argument: slot} if slot_argument else {}
            running.append((task.submit(**kwargs, **extra), index, slot))
        finished = next(as_completed([future for future, _, _ in running]))
        index = next(i for future, i, _ in running if future is finished)
        running = [entry for entry in running if entry[0] is not finished]
        try:
            results[index] = finished.result()
        except BaseException:
            waiting.clear()
            wait([future for future, _, _ in running])
            raise
    return [results[i] for i in range(len(calls))]
