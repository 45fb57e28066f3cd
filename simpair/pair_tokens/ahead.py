"""Run an iterator in a background thread, a bounded number of items ahead of the code reading it.

Tokenizing and reading Parquet spend their time in Rust and Arrow with the GIL released, and a
model's forward pass spends it in torch kernels: a producer thread lets the next items be made
while the current one is used, so the slower side alone sets the pace. The queue holds at most
`depth` finished items (memory stays flat whatever the length of the iterator), an exception raised
while making an item is raised again in the reader at the point it would have received that item,
and leaving early (the reader's own error, `close`, a `with` block) stops the producer at its next
item and joins it, so no thread outlives its reader.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")
POLL_S = 0.05  # how often a blocked producer or reader checks that the other side is still there


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE = object()


class Ahead(Generic[T]):
    """`items`, made in a background thread at most `depth` ahead; use as an iterator in a `with`."""

    def __init__(self, items: Iterable[T], depth: int = 2, name: str = "simpair-ahead") -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = False
        self.wait_s = 0.0  # seconds the reader spent waiting for an item
        self._thread = threading.Thread(target=self._produce, args=(iter(items),), name=name, daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self, items: Iterator[T]) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as error:  # handed to the reader, raised there
            self._put(_Failed(error))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        self._put(_DONE)

    def __iter__(self) -> Ahead[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        began = time.perf_counter()
        while True:
            try:
                item = self._queue.get(timeout=POLL_S)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self.close()
                    raise RuntimeError("the producer thread ended without a result") from None
        self.wait_s += time.perf_counter() - began
        if item is _DONE:
            self.close()
            raise StopIteration
        if isinstance(item, _Failed):
            self.close()
            raise item.error
        return item  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the producer (at its next item) and wait for its thread to end."""
        self._finished = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> Ahead[T]:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
