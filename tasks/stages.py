"""Run a job's stages as Prefect tasks: the flow-side `simpair.stages.StageRunner`, written once.

A flow hands `PrefectStages` the map from each stage of its DAG (a plain function of `simpair`) to
the Prefect task that wraps it; the domain's DAG function (`run_ingest`, `run_scoring`, `run_mine`)
then calls the stages through it. `run` calls the task, `map` maps it over the flow's task runner,
`submit` submits it with futures as arguments, `result` waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from prefect import Task, unmapped
from prefect.utilities.annotations import quote

T = TypeVar("T")


class PrefectStages:
    """Runs each stage as its Prefect task (see `simpair.stages.StageRunner`).

    `quoted`: `run` passes its arguments quoted, for stages whose arguments hold whole columns of
    texts or arrays of vectors, which Prefect would otherwise walk element by element looking for
    futures (mining). Off where `run` is given plain settings and `submit` futures (scoring).
    """

    def __init__(self, tasks: Mapping[Callable[..., Any], Task], quoted: bool = False) -> None:
        self.tasks = dict(tasks)
        self.quoted = quoted

    def _task(self, stage: Callable[..., Any]) -> Task:
        try:
            return self.tasks[stage]
        except KeyError:
            raise KeyError(f"no Prefect task wired for stage {stage.__qualname__}") from None

    def run(self, stage: Callable[..., T], /, **kwargs: Any) -> T:
        if self.quoted:
            kwargs = {name: quote(value) for name, value in kwargs.items()}
        return self._task(stage)(**kwargs)

    def map(self, stage: Callable[..., Any], over: Mapping[str, Sequence[Any]], /, **fixed: Any) -> Any:
        return self._task(stage).map(**over, **{k: unmapped(v) for k, v in fixed.items()})

    def submit(self, stage: Callable[..., Any], /, **kwargs: Any) -> Any:
        return self._task(stage).submit(**kwargs)

    def result(self, started: Any) -> Any:
        return started.result()
