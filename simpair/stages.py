"""How a pipeline's stages run: one protocol, and the runner that runs them here and now.

A job (ingest, scoring, mining) is written once as a function that calls its stages through a runner: plain
functions of plain values, each called with keyword arguments. `InProcess` runs each stage in this
process, in the order asked (`--no-prefect`, Python callers); `simpair.tasks.stages.PrefectStages`
runs each as its Prefect task in a flow. Both see the same calls in the same order, so a flow run
and an in-process run do the same work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


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
