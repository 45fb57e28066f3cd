"""Pipeline steps: each declared once, on its domain function, and the runner that runs them here.

A job (ingest, scoring, mining, the night) is written once as a function that calls its steps through
a runner: plain functions of plain values, each called with keyword arguments. Each step is declared
where it is defined, with `@step("score-chunk", retries=2, ...)`: its name, retries, timeout and tags.
Its inputs are the function's parameters. Everything that runs the step reads that one declaration:
`InProcess` calls the function (`--no-prefect`, Python callers), `simpair.nightly.retry.RetryingInProcess`
retries the steps the night retries, and `simpair.tasks.stages.as_task` builds the step's Prefect task
from it, which `simpair.tasks.stages.PrefectStages` runs in a flow. Both runners see the same calls in
the same order, so a flow run and an in-process run do the same work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Step:
    """How a step runs, wherever it runs (its inputs are its function's parameters).

    `name` names its Prefect task; `retries` and `retry_delay_seconds` are its task's retries;
    `transient_only` retries only faults `simpair.registry.faults.is_transient` calls transient;
    `profile_retries` gives it the nightly profile's retries instead (transient faults only), in the
    flow and in process alike; `run_name` is its task runs' name, formatted with its arguments.
    """

    name: str
    retries: int = 0
    retry_delay_seconds: float | tuple[float, ...] = 0.0
    timeout_seconds: float | None = None
    tags: tuple[str, ...] = ()
    run_name: str | None = None
    transient_only: bool = False
    profile_retries: bool = False


def step(name: str, **how: Any) -> Callable[[F], F]:
    """Declare the decorated domain function a pipeline step (see `Step`); the function is unchanged.

    A function is declared once: a second, different declaration of it raises (two places would
    otherwise each believe theirs is the step's name and retries)."""
    declared = Step(name, **how)

    def declare(fn: F) -> F:
        already = getattr(fn, "__step__", None)
        if already is not None and already != declared:
            raise TypeError(f"{fn.__qualname__} is already declared as step {already.name!r}")
        fn.__step__ = declared  # type: ignore[attr-defined]
        return fn

    return declare


def declaration(fn: Callable[..., Any]) -> Step:
    """The step `fn` was declared as (`@step`)."""
    try:
        return fn.__step__  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(f"{fn.__qualname__} is not declared a step (@simpair.stages.step)") from None


class StageRunner(Protocol):
    """How the DAG's stages run. Stages are called with keyword arguments only.

    `run` runs a stage now and returns its value; `map` starts a stage once per value of the one
    keyword in `over` (the others fixed) and `submit` starts one stage whose arguments may be what
    `map` returned; `result` waits for what `map` or `submit` returned and gives its value(s).
    """

    def run(self, stage: Callable[..., T], /, **kwargs: Any) -> T: ...

    def map(self, stage: Callable[..., Any], over: Mapping[str, Sequence[Any]], /, **fixed: Any) -> Any: ...

    def submit(self, stage: Callable[..., Any], /, **kwargs: Any) -> Any: ...

    def result(self, started: Any) -> Any: ...


class InProcess:
    """Runs every stage here and now, one after the other, in the order the DAG asks for them.

    `after(stage, value)` is called after each stage call (progress, or tests that act mid-run).
    """

    def __init__(self, after: Callable[[Callable[..., Any], Any], None] | None = None) -> None:
        self.after = after

    def run(self, stage: Callable[..., T], /, **kwargs: Any) -> T:
        value = stage(**kwargs)
        if self.after:
            self.after(stage, value)
        return value

    def map(self, stage: Callable[..., Any], over: Mapping[str, Sequence[Any]], /, **fixed: Any) -> list:
        ((key, values),) = over.items()
        return [self.run(stage, **fixed, **{key: value}) for value in values]

    def submit(self, stage: Callable[..., Any], /, **kwargs: Any) -> Any:
        return self.run(stage, **kwargs)

    def result(self, started: Any) -> Any:
        return started
