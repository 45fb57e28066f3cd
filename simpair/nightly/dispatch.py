"""How a task trained on a work pool reports back through the shared home: result file, heartbeat, verdict.

With `dispatch: pool` the night runs each task's pre-tokenize -> train -> evaluate as a flow run on
another machine (the `gpu` pool). Nothing travels back through Prefect's result storage: the
training run writes its `Trained` record (model folder, metrics, evaluation files, all in the shared
home) as JSON to a path the night chose, or on failure the error and whether it is transient; while
it runs it touches a heartbeat file beside it. The night reads that file, and decides from the run's
final state and the heartbeat whether to use the result, retry, or fail.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from simpair.atomic import atomic_write_text
from simpair.nightly.summary import Trained
from simpair.registry.faults import is_transient

HEARTBEAT_SECONDS = 5.0


class PoolRunFailed(RuntimeError):
    """A training run on the pool failed or was lost; `transient` says whether a retry may help."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def result_path(home: Path, night_id: str, task: str, attempt: int) -> Path:
    """Where the run for `task` (this attempt) writes its result: `<home>/nightly/dispatch/<night>/`."""
    return Path(home) / "nightly" / "dispatch" / (night_id or "no-run-id") / f"{task}-{attempt}.json"


def heartbeat_path(result: Path) -> Path:
    return result.with_name(result.name + ".heartbeat")


def write_result(path: Path, trained: Trained) -> None:
    atomic_write_text(Path(path), json.dumps({"trained": trained.model_dump(mode="json")}) + "\n")


def write_error(path: Path, exc: BaseException) -> None:
    record = {"error": f"{type(exc).__name__}: {exc}", "transient": is_transient(exc)}
    atomic_write_text(Path(path), json.dumps(record) + "\n")


def read_result(path: Path) -> Trained:
    """The `Trained` record the run wrote, or `PoolRunFailed` with its error (or that none was written)."""
    path = Path(path)
    if not path.is_file():
        raise PoolRunFailed(f"the training run wrote no result to {path}", transient=True)
    record = json.loads(path.read_text())
    if "trained" in record:
        return Trained.model_validate(record["trained"])
    raise PoolRunFailed(str(record.get("error")), transient=bool(record.get("transient")))


def run_error(path: Path) -> PoolRunFailed | None:
    """The error a failed run recorded, if it got as far as recording one."""
    try:
        read_result(path)
    except PoolRunFailed as exc:
        return exc if Path(path).is_file() else None
    return None


@contextmanager
def heartbeat(result: Path, every: float = HEARTBEAT_SECONDS) -> Iterator[None]:
    """Touch the heartbeat file beside `result` every `every` seconds while the block runs."""
    beat = heartbeat_path(Path(result))
    beat.parent.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def _beat() -> None:
        while True:
            beat.write_text(f"{time.time()}\n")
            if stop.wait(every):
                return

    thread = threading.Thread(target=_beat, name="simpair-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every + 1)


def seconds_since_heartbeat(result: Path, started: float) -> float:
    """Seconds since the run last showed life (since `started`, a `time.time()`, if it never beat)."""
    beat = heartbeat_path(Path(result))
    try:
        last = max(beat.stat().st_mtime, started)
    except FileNotFoundError:
        last = started
    return time.time() - last


def recorded(result: Path | None, work: Callable[[], Trained]) -> Trained:
    """`work()`, and with a `result` path (a run the night dispatched to a pool) its `Trained` record,
    or its error, written there, with a heartbeat file beside it while it runs."""
    if result is None:
        return work()
    with heartbeat(Path(result)):
        try:
            trained = work()
        except BaseException as exc:
            write_error(Path(result), exc)
            raise
    write_result(Path(result), trained)
    return trained
