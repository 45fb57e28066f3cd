"""Each declared step as its Prefect task, and the flow-side `simpair.stages.StageRunner`.

`as_task(fn)` builds a step's Prefect task from its declaration (`@simpair.stages.step` on the domain
function): the task's name, retries, timeout, tags and run name are the declaration's, its parameters
the function's, so no signature is written twice. `then` adds what only a flow has (a markdown
artifact) after the function returns; `adds` hands it arguments only a flow knows (its run's tags).

A flow hands `PrefectStages` the tasks of its steps in DAG order (and, for a step that runs as a
subflow or submits tasks itself, `instead(step, runs_it)`); each task knows the step it was built from,
so no table pairs steps with tasks. The domain's DAG function (`run_ingest`, `run_scoring`, `run_mine`,
`run_night`, `run_training`) then calls its steps through it. `run` calls the task, `map` maps it over
the flow's task runner, `submit` submits it with futures as arguments, `result` waits.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from prefect import Task, task, unmapped
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from simpair.registry.faults import is_transient
from simpair.stages import declaration

T = TypeVar("T")


def retry_if_transient(task_: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry only transient faults (network, tracking store, I/O)."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception as err:  # the result itself may be unreadable
            exc = err
    return isinstance(exc, BaseException) and is_transient(exc)


def as_task(
    fn: Callable[..., T],
    *,
    then: Callable[[T, dict[str, Any]], None] | None = None,
    adds: Callable[[], dict[str, Any]] | None = None,
) -> Task[..., T]:
    """The Prefect task of step `fn`, from its declaration. Caching is off for every step: each job is
    idempotent on its own terms (content-addressed versions, the scoring ledger), and a cache keyed on
    arguments would skip a run whose files changed under the same names.

    `then(value, arguments)` runs after `fn` returns, with its arguments by name (an artifact);
    `adds()` gives keyword arguments the DAG does not pass (e.g. the flow run's tags)."""
    declared = declaration(fn)
    body: Callable[..., T] = fn
    if then is not None or adds is not None:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def body(*args: Any, **kwargs: Any) -> T:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            bound.arguments.update(adds() if adds else {})
            value = fn(*bound.args, **bound.kwargs)
            if then is not None:
                then(value, dict(bound.arguments))
            return value

    delay = declared.retry_delay_seconds
    return task(
        body,
        name=declared.name,
        task_run_name=declared.run_name,
        retries=declared.retries,
        retry_delay_seconds=list(delay) if isinstance(delay, tuple) else delay,
        retry_condition_fn=retry_if_transient if declared.transient_only else None,
        timeout_seconds=declared.timeout_seconds,
        tags=list(declared.tags),
        cache_policy=NO_CACHE,
    )


@dataclass(frozen=True)
class Instead:
    """Step `stage` run in the flow by `runs` instead of a task of its own: a subflow (the night's
    ingest and trainings), or a function that submits tasks itself (members trained side by side)."""

    stage: Callable[..., Any]
    runs: Callable[..., Any]


def instead(stage: Callable[..., Any], runs: Callable[..., Any]) -> Instead:
    """`stage`, run in the flow by `runs` (which takes the same keyword arguments)."""
    return Instead(stage, runs)


def stage_of(runs: Task | Instead) -> Callable[..., Any]:
    """The domain function a task built by `as_task` runs, or the step an `Instead` stands for."""
    return runs.stage if isinstance(runs, Instead) else inspect.unwrap(runs.fn)


class PrefectStages:
    """Runs each step as its Prefect task (see `simpair.stages.StageRunner`).

    `steps`: the steps' tasks (built by `as_task`), and `instead(step, runs_it)` for a step run
    otherwise. `quoted`: `run` passes its arguments quoted, for steps whose arguments hold whole
    columns of texts or arrays of vectors, which Prefect would otherwise walk element by element
    looking for futures (mining). Off where `run` is given plain settings and `submit` futures (scoring).
    """

    def __init__(self, steps: Iterable[Task | Instead] = (), quoted: bool = False) -> None:
        self.tasks: dict[Callable[..., Any], Any] = {}
        for runs in steps:
            stage = stage_of(runs)
            if stage in self.tasks:
                raise ValueError(f"step {stage.__qualname__} is given twice")
            self.tasks[stage] = runs.runs if isinstance(runs, Instead) else runs
        self.quoted = quoted

    def _task(self, stage: Callable[..., Any]) -> Any:
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
