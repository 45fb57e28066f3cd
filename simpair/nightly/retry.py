"""The night's in-process runner: `InProcess`, with the profile's retries on the stages that have them.

The stages retried are those declared with `profile_retries` (`@simpair.stages.step`). In the flow,
Prefect retries their tasks (`simpair.tasks.nightly.stages`); here they are retried the same way:
only faults `simpair.registry.faults.is_transient` calls transient, `retries.attempts` times,
waiting `retries.delays_seconds` (the last delay repeats) in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from simpair.nightly.profile import Retries
from simpair.registry.faults import is_transient
from simpair.stages import InProcess, declaration

T = TypeVar("T")


def retry_delay(retries: Retries, attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based)."""
    delays = retries.delays_seconds
    return delays[min(attempt - 1, len(delays) - 1)] if delays else 0.0


class RetryingInProcess(InProcess):
    """Runs every stage here and now; a stage declared with `profile_retries` that fails on a
    transient fault runs again."""

    def __init__(self, retries: Retries) -> None:
        super().__init__()
        self.retries = retries

    def _retried(self, stage: Callable[..., Any]) -> bool:
        return hasattr(stage, "__step__") and declaration(stage).profile_retries

    def run(self, stage: Callable[..., T], /, **kwargs: Any) -> T:
        attempts = self.retries.attempts + 1 if self._retried(stage) else 1
        for attempt in range(1, attempts + 1):
            try:
                return super().run(stage, **kwargs)
            except Exception as exc:
                if attempt == attempts or not is_transient(exc):
                    raise
                delay = retry_delay(self.retries, attempt)
                print(f"{stage.__name__}: {type(exc).__name__}: {exc}; retrying in {delay:g} s")
                time.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises
