"""Writes that run on a second thread while the caller goes on parsing or filtering the next batch.

Parquet encoding in polars releases the GIL, so on two cores a chunk's candidate and quarantine
parts can be written while Python cuts and maps the next chunk. At most `limit` writes wait (each
holds its frame), so memory stays bounded; one thread runs them in submission order. The first error
is raised by the next `submit` or by `drain`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from typing import Any


class BackgroundWrites:
    def __init__(self, limit: int = 2) -> None:
        self.limit = limit
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simpair-write")
        self._pending: deque[Future[Any]] = deque()

    def submit(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._pending.append(self._pool.submit(write, *args, **kwargs))
        while len(self._pending) > self.limit:
            self._pending.popleft().result()

    def drain(self) -> None:
        """Wait for every write; raise the first error."""
        while self._pending:
            self._pending.popleft().result()

    def close(self) -> None:
        """Wait for every write (errors included, so none is left writing), then stop the thread."""
        try:
            self.drain()
        finally:
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)

    def __enter__(self) -> BackgroundWrites:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:  # already failing: wait for the writes quietly, keep the first error
            with suppress(Exception):  # the error being raised says more
                self.close()
