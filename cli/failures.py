"""How a failed `simpair` command ends: one clear line on stderr and exit 1, the traceback on request.

`SimpairTyper` is the app's class: whatever a command raises that is not a usage error becomes
`error: <what went wrong> (--debug for the traceback)` and exit code 1. With `simpair --debug ...`
or `SIMPAIR_DEBUG=1` the full traceback is printed first. Typer's `CliRunner` calls the command
underneath, so tests still see the exception itself.

`quiet_prefect_console()` does the same for Prefect's own console log once a command has imported a
flow: a failed task or flow run still logs its one line, while the traceback goes only to the
flow-run log (Prefect's API handler), unless --debug.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import traceback
from typing import Any

import typer

_ENV = "SIMPAIR_DEBUG"
_debug = False


def set_debug(on: bool) -> None:
    """Turn full tracebacks on for this command (the app's `--debug`)."""
    global _debug
    _debug = on


def debug_enabled() -> bool:
    """Whether failures print their traceback: `--debug` or SIMPAIR_DEBUG=1."""
    return _debug or os.environ.get(_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def describe(exc: BaseException) -> str:
    """The one line that matters: the message, after its type unless simpair wrote it to be read."""
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__module__.startswith("simpair") or text == type(exc).__name__:
        return text
    return f"{type(exc).__name__}: {text}"


def report(exc: BaseException) -> int:
    """Print the failure to stderr (traceback first with --debug) and return the exit code."""
    if debug_enabled():
        traceback.print_exception(exc, file=sys.stderr)
        print(f"error: {describe(exc)}", file=sys.stderr, flush=True)
    else:
        print(f"error: {describe(exc)} (--debug for the traceback)", file=sys.stderr, flush=True)
    return 1


class SimpairTyper(typer.Typer):
    """A typer app whose failures end as one line and exit 1 (see the module docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except Exception as exc:  # usage errors, typer.Exit and ctrl-C end inside click already
            sys.exit(report(exc))


class _WithoutTraceback(logging.Formatter):
    """Formats a record as `inner` would, without its traceback (the record itself is untouched)."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            record = copy.copy(record)
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return self.inner.format(record)


def quiet_prefect_console() -> None:
    """Prefect's console log keeps each line of a failed run and drops its traceback (not with --debug).

    Call after importing a flow. Only the console handler changes: the flow-run log (API handler)
    still receives every record with its traceback.
    """
    if debug_enabled():
        return
    from prefect.logging.handlers import PrefectConsoleHandler  # noqa: PLC0415 - only once Prefect is in

    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in ("prefect", "uvicorn", "fastapi"))]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, PrefectConsoleHandler) and not isinstance(
                handler.formatter, _WithoutTraceback
            ):
                handler.setFormatter(_WithoutTraceback(handler.formatter))
