"""One nightly DAG: `simpair nightly --no-prefect` runs the night in process, with no Prefect at all.
That it registers, marks and gates what the `nightly-retrain` flow does on the same data is checked
against the flow's first night in tests/test_nightly.py (one flow night for both)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simpair.nightly.night import night_in_process
from simpair.nightly.profile import Retries
from simpair.nightly.retry import RetryingInProcess
from simpair.nightly.summary import NightlyFailed
from simpair.stages import step


def test_no_prefect_night_refuses_pool_dispatch_before_taking_the_lock(tmp_path: Path) -> None:
    home = tmp_path / "brand-new"
    home.mkdir()
    with pytest.raises(NightlyFailed, match="dispatch: pool needs Prefect") as refused:
        night_in_process(profile="smoke", home=home, dispatch="pool")
    assert "\n" not in str(refused.value)
    assert list(home.iterdir()) == []  # no lock file, no ingest, no tracking store


def test_in_process_stages_retry_transient_faults_only() -> None:
    calls: list[str] = []

    def flaky(kind: str) -> str:
        calls.append(kind)
        if len(calls) == 1:
            raise (
                ConnectionError("tracking store reset the connection")
                if kind == "io"
                else ValueError("bad config")
            )
        return "done"

    retried = step("flaky", profile_retries=True)(flaky)
    once = step("once")(lambda kind: flaky(kind))
    runner = RetryingInProcess(Retries(attempts=2, delays_seconds=[0.0]))
    assert runner.run(retried, kind="io") == "done" and calls == ["io", "io"]
    calls.clear()
    with pytest.raises(ValueError, match="bad config"):
        runner.run(retried, kind="permanent")
    assert calls == ["permanent"]  # a permanent fault is not retried
    calls.clear()
    with pytest.raises(ConnectionError):
        runner.run(once, kind="io")
    assert calls == ["io"]  # a step not declared with profile retries runs once
