"""Submit one Prefect task per argument set, at most `jobs` running at a time (a freed slot refills).

The scheduling is `simpair.training.side_by_side.side_by_side`, the one the command line's worker
processes use too; this module only plugs in Prefect's futures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from prefect import Task
from prefect.futures import PrefectFuture, as_completed, wait

from simpair.training.side_by_side import side_by_side

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

    def start(index: int, slot: int) -> PrefectFuture[R]:
        extra = {slot_argument: slot} if slot_argument else {}
        return task.submit(**calls[index], **extra)

    return side_by_side(
        start,
        len(calls),
        jobs,
        first_done=lambda futures: next(as_completed(list(futures))),
        wait_all=lambda futures: wait(list(futures)),
        result=lambda future: future.result(),
        on_start=on_start,
    )
