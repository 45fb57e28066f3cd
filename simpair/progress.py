"""Progress of a long loop: a tqdm bar on a terminal, a periodic plain line in a log.

Under a worker, cron or `nohup`, stderr is a file or a pipe, and tqdm's carriage-return redraws pile
up into one endless line. There the same calls write a plain line every 10 % of the loop or every
30 s, whichever comes first, and one when the loop ends, e.g.

    msrp-cross epoch 2/3: 40% (120/300 batches), 12.3 batches/s, eta 15s, loss=0.4123

Inside a Prefect flow run the lines are prints, so they also land in the flow-run log. On a terminal
nothing changes: a tqdm bar as before, on the line (`position`) a side-by-side training owns.
`SIMPAIR_PROGRESS=bar` or `=lines` forces one or the other.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from tqdm.auto import tqdm

EVERY_PERCENT = 10
EVERY_SECONDS = 30.0
_VARIABLE = "SIMPAIR_PROGRESS"


def plain_lines(stream: IO[str] | None = None) -> bool:
    """Whether progress on `stream` (default stderr) is written as plain lines rather than a bar."""
    forced = os.environ.get(_VARIABLE, "").strip().lower()
    if forced in ("bar", "bars", "tty"):
        return False
    if forced in ("lines", "line", "log", "plain"):
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return True


def progress(
    iterable: Iterable[Any] | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    disable: bool = False,
    leave: bool = True,
    mininterval: float = 0.1,
    position: int | None = None,
    file: IO[str] | None = None,
) -> Any:
    """A progress bar (tqdm's arguments) on a terminal, a `LineProgress` anywhere else.

    Both iterate over `iterable`, and take `update(n)`, `set_postfix(**values)` and `close()`.
    """
    if disable or not plain_lines(file):
        return tqdm(
            iterable,
            total=total,
            desc=desc,
            unit=unit,
            disable=disable,
            leave=leave,
            mininterval=mininterval,
            position=position,
            file=file,
        )
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    return LineProgress(iterable, total=total, desc=desc, unit=unit, file=file)


def note(message: str, file: IO[str] | None = None) -> None:
    """A result line between progress updates (default: stdout), kept clear of a bar on a terminal."""
    if plain_lines():
        print(message, file=file, flush=True)
    else:
        tqdm.write(message, file=file)


class LineProgress:
    """tqdm's interface, written as a plain line every `every_percent` % or `every_seconds` s.

    `min_seconds` keeps a fast loop from writing all its percent steps at once: a percent line waits
    until that long after the previous line (the last line, at the end, always comes).
    """

    def __init__(
        self,
        iterable: Iterable[Any] | None = None,
        *,
        total: int | None = None,
        desc: str = "",
        unit: str = "it",
        file: IO[str] | None = None,
        every_percent: float = EVERY_PERCENT,
        every_seconds: float = EVERY_SECONDS,
        min_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.iterable = iterable
        self.total = total
        self.desc = desc
        self.unit = unit
        self.file = file
        self.every_percent = every_percent
        self.every_seconds = every_seconds
        self.min_seconds = min_seconds
        self.clock = clock
        self.n = 0
        self.postfix = ""
        self.closed = False
        self.started = clock()
        self._last_time = self.started
        self._last_n = 0
        self._last_step = 0

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("LineProgress built without an iterable")
        for item in self.iterable:
            yield item
            self.update(1)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.total or 0

    def set_postfix(
        self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **values: Any
    ) -> None:
        """Values shown after the rate, as `key=value` (tqdm's signature)."""
        items = {**(ordered_dict or {}), **values}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def update(self, n: int = 1) -> None:
        """Count `n` more units done; write a line when a percent step or the time interval is due."""
        self.n += n
        now = self.clock()
        since = now - self._last_time
        step = self._step()
        if since >= self.every_seconds or (step > self._last_step and since >= self.min_seconds):
            self._emit(now)

    def close(self) -> None:
        """The last line (unless the last update already wrote it); later calls do nothing."""
        if self.closed:
            return
        self.closed = True
        if self.n != self._last_n:
            self._emit(self.clock(), final=True)

    def refresh(self) -> None:
        """Nothing to redraw in a log (tqdm compatibility)."""

    def _step(self) -> int:
        if not self.total or self.every_percent <= 0:
            return 0
        return int(self.n * 100 / self.total // self.every_percent)

    def _emit(self, now: float, final: bool = False) -> None:
        self._last_time, self._last_n, self._last_step = now, self.n, self._step()
        print(self.line(now, final), file=sys.stderr if self.file is None else self.file, flush=True)

    def line(self, now: float | None = None, final: bool = False) -> str:
        """The line as it would be written now."""
        elapsed = max((self.clock() if now is None else now) - self.started, 0.0)
        rate = self.n / elapsed if elapsed > 0 else 0.0
        units = _plural(self.unit)
        head = f"{self.desc}: " if self.desc else ""
        if self.total:
            parts = [f"{head}{100 * self.n / self.total:.0f}% ({self.n}/{self.total} {units})"]
        else:
            parts = [f"{head}{self.n} {units}"]
        parts.append(f"{rate:.1f} {units}/s")
        if final or (self.total and self.n >= self.total):
            parts.append(f"took {_duration(elapsed)}")
        elif self.total and rate > 0:
            parts.append(f"eta {_duration((self.total - self.n) / rate)}")
        else:
            parts.append(f"{_duration(elapsed)} elapsed")
        if self.postfix:
            parts.append(self.postfix)
        return ", ".join(parts)


def _plural(unit: str) -> str:
    if unit.endswith(("s", "x", "ch", "sh")):
        return unit if unit.endswith("s") else f"{unit}es"
    return unit if len(unit) <= 2 else f"{unit}s"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
