"""How a `simpair` command ends: its exit code, and a failure as one `error:` line on stderr.

Every command exits with the same codes (`EXIT_*`): 0 done; 1 bad input or a refusal (no model, the
output locked by another run, int8 refused, a failed source ...); 2 a usage error (click's: a bad
option value, a missing argument); 3 only under `--strict`: the command finished, but its summary
counts quarantined or rejected rows or files.

A refusal the command expects ends through `fail()`: `error: <what and what to do>` on stderr and exit
1, nothing on stdout. `SimpairTyper` is the app's class: whatever else a command raises that is not a
usage error becomes `error: <what went wrong> (--debug for the traceback)` and exit 1. With
`simpair --debug ...` or `SIMPAIR_DEBUG=1` the full traceback is printed first. Typer's `CliRunner`
calls the command underneath, so tests still see the exception itself.

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
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

EXIT_OK = 0
EXIT_FAILED = 1  # bad input or a refusal: no model, locked output, int8 refused, a failed source
EXIT_USAGE = 2  # click's own code for usage errors (bad option value, missing argument)
EXIT_QUARANTINED = 3  # only with --strict: finished, but rows or files were quarantined or rejected

_ENV = "SIMPAIR_DEBUG"
_debug = False


# Libraries whose INFO (or WARNING) lines are about their own workings, not the user's data: MLflow
# creating its tables, alembic migrating them, HTTP clients, numexpr's thread count ...
QUIET_LOGGERS = {
    "mlflow": logging.WARNING,
    "alembic": logging.WARNING,
    "sqlalchemy": logging.WARNING,
    "urllib3": logging.WARNING,
    "httpx": logging.WARNING,
    "httpcore": logging.WARNING,
    "numexpr": logging.WARNING,
    "filelock": logging.WARNING,
    "fsspec": logging.WARNING,
    "botocore": logging.WARNING,
    "s3fs": logging.WARNING,
    "distributed": logging.WARNING,
    "onnxruntime": logging.WARNING,
    # transformers warns at WARNING about what simpair handles: "Token indices sequence length is
    # longer than the specified maximum" for a pair that is then truncated as asked
    "transformers": logging.ERROR,
    "sentence_transformers": logging.ERROR,
    "huggingface_hub": logging.ERROR,
}
# The same through the environment, read when those libraries are first imported, here and in the
# processes a command starts (Dask workers, training members).
QUIET_ENVIRONMENT = {"MLFLOW_LOGGING_LEVEL": "WARNING", "TRANSFORMERS_VERBOSITY": "error"}


def set_debug(on: bool) -> None:
    """Turn full tracebacks on for this command (the app's `--debug`); without it, quiet the libraries."""
    global _debug
    _debug = on
    if not debug_enabled():
        quiet_third_party()


def quiet_third_party() -> None:
    """Other libraries' log lines and FutureWarnings stay off the console (simpair's own lines stay).

    Called when a command starts without --debug, before the command imports MLflow or transformers;
    levels are also set on loggers already made, for a library imported earlier.
    """
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    if "transformers" in sys.modules:  # its own verbosity call also covers loggers it made already
        from transformers.utils import logging as transformers_logging  # noqa: PLC0415

        transformers_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)


def debug_enabled() -> bool:
    """Whether failures print their traceback: `--debug` or SIMPAIR_DEBUG=1."""
    return _debug or os.environ.get(_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def describe(exc: BaseException) -> str:
    """The one line that matters: the message, after its type unless simpair wrote it to be read.

    A message over several lines (a library's, or one that quotes a file) is joined into one, as
    `fail()` does, so a failure is always one `error:` line.
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
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


def fail(message: str, exc: BaseException | None = None) -> NoReturn:
    """End the command on a refusal: `error: <message>` on stderr, exit 1 (`exc`'s traceback first
    under --debug). The message says what was refused and, where there is one, what to do instead."""
    if exc is not None and debug_enabled():
        traceback.print_exception(exc, file=sys.stderr)
    print(f"error: {' '.join(message.split())}", file=sys.stderr, flush=True)
    raise typer.Exit(EXIT_FAILED)


@contextmanager
def job_refusals() -> Iterator[None]:
    """A job's refusals end the command as one `error:` line, exit 1, the same in `score`, `mine` and
    `encode`: another run holding the output (`RunLocked`) or the int8 parity guard's refusal with its
    figures (`Int8Refused`) as `not started: ...`; a model that resolves to nothing (`LookupError`: no
    such registry alias or version, a folder that is no model) as its own message."""
    from simpair.models.int8_check import Int8Refused
    from simpair.scoring.lock import RunLocked

    try:
        yield
    except (RunLocked, Int8Refused) as exc:
        fail(f"not started: {exc}", exc)
    except LookupError as exc:
        fail(str(exc), exc)


def finish(strict: bool, quarantined: int, detail: str) -> None:
    """Exit 3 under `--strict` when the finished command quarantined or rejected something (else return).

    The summary already printed the counts; `strict: <detail>` on stderr says why the exit code is 3.
    """
    if strict and quarantined:
        print(f"strict: {detail} (exit {EXIT_QUARANTINED})", file=sys.stderr, flush=True)
        raise typer.Exit(EXIT_QUARANTINED)


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

    Call before running a flow. Only the console handler changes: the flow-run log (API handler)
    still receives every record with its traceback.
    """
    if debug_enabled():
        return
    import prefect.main  # noqa: F401, PLC0415 - its import sets up logging (the handlers changed below)
    from prefect.logging.handlers import PrefectConsoleHandler  # noqa: PLC0415 - only once Prefect is in

    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in ("prefect", "uvicorn", "fastapi"))]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, PrefectConsoleHandler) and not isinstance(
                handler.formatter, _WithoutTraceback
            ):
                handler.setFormatter(_WithoutTraceback(handler.formatter))
