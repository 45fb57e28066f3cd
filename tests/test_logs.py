"""Logs a worker can keep: plain progress lines off a terminal, one error line per failed command, and
the command line's own quiet defaults."""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simpair.progress import LineProgress, note, plain_lines, progress

REPO = Path(__file__).resolve().parents[1]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_progress_is_a_plain_line_every_ten_percent() -> None:
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(range(300), total=300, desc="toy epoch 2/3", unit="batch", file=out, clock=clock)
    for _ in bar:
        clock.now += 0.1
        bar.set_postfix(loss="0.4123")
    bar.close()
    text = out.getvalue()
    lines = text.splitlines()
    assert "\r" not in text
    assert len(lines) == 10
    assert lines[3] == "toy epoch 2/3: 40% (120/300 batches), 10.0 batches/s, eta 18s, loss=0.4123"
    assert lines[-1] == "toy epoch 2/3: 100% (300/300 batches), 10.0 batches/s, took 30s, loss=0.4123"


def test_a_slow_loop_writes_every_thirty_seconds_and_a_fast_one_only_its_end() -> None:
    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(total=1000, desc="predict", unit="pair", file=out, clock=clock)
    for _ in range(50):  # 5 % of the work, 10 s apart: only the interval is due
        clock.now += 10
        bar.update(1)
    bar.close()  # stopped early: the last line says how far it got
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 + 50 * 10 // 30
    assert lines[0].startswith("predict: 0% (3/1000 pairs)")
    assert lines[-1] == "predict: 5% (50/1000 pairs), 0.1 pairs/s, took 8m20s"

    out, clock = io.StringIO(), _Clock()
    bar = LineProgress(range(100), total=100, desc="fast", unit="pair", file=out, clock=clock)
    for _ in bar:
        clock.now += 0.001
    bar.close()
    assert out.getvalue().splitlines() == ["fast: 100% (100/100 pairs), 1000.0 pairs/s, took 0s"]


def test_progress_draws_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIMPAIR_PROGRESS", raising=False)
    assert plain_lines(io.StringIO()) and not plain_lines(_Terminal())
    assert isinstance(progress(range(3), file=io.StringIO()), LineProgress)
    assert not isinstance(progress(range(3), file=_Terminal()), LineProgress)
    monkeypatch.setenv("SIMPAIR_PROGRESS", "lines")
    assert isinstance(progress(range(3), file=_Terminal()), LineProgress)
    monkeypatch.setenv("SIMPAIR_PROGRESS", "bar")
    assert not isinstance(progress(range(3), file=io.StringIO()), LineProgress)
    disabled = progress(range(3), disable=True, file=io.StringIO())
    assert list(disabled) == [0, 1, 2]


def test_note_is_a_plain_line_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMPAIR_PROGRESS", "lines")
    out = io.StringIO()
    note("toy epoch 1: loss 0.5000", file=out)
    assert out.getvalue() == "toy epoch 1: loss 0.5000\n"


def test_training_progress_in_a_log_has_lines_and_no_carriage_returns(
    home: Path, capfd: pytest.CaptureFixture[str], one_thread: None
) -> None:
    from test_training import config
    from test_training_toydata import write_toy_home

    from simpair.training import train

    write_toy_home(home)
    train(config(progress=True), home)
    captured = capfd.readouterr()
    assert "\r" not in captured.err
    for epoch in (1, 2):
        assert f"toy epoch {epoch}/2: 100% (5/5 batches)" in captured.err
        assert f"toy epoch {epoch}: loss " in captured.out


def test_prefect_console_keeps_the_line_and_drops_the_traceback() -> None:
    import prefect.main  # noqa: F401 - sets up Prefect's logging, as before any flow run
    from prefect.logging.handlers import PrefectConsoleHandler

    from simpair.cli import failures

    console_out, api_out = io.StringIO(), io.StringIO()
    console = PrefectConsoleHandler(stream=console_out)
    api = logging.StreamHandler(api_out)  # stands in for the flow-run log's API handler
    root = logging.getLogger()
    logger = logging.getLogger("prefect.flow_runs.simpair-test")
    root.addHandler(console)
    logger.addHandler(api)
    try:
        failures.quiet_prefect_console()
        try:
            raise FileNotFoundError("nightly profile 'nosuch'")
        except FileNotFoundError:
            logger.error("Encountered exception during execution", exc_info=True)
    finally:
        root.removeHandler(console)
        logger.removeHandler(api)
    assert "Encountered exception during execution" in console_out.getvalue()
    assert "Traceback" not in console_out.getvalue()
    assert "Traceback" in api_out.getvalue() and "nightly profile 'nosuch'" in api_out.getvalue()


def _clean_env(**extra: str) -> dict[str, str]:
    quiet = ("HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM", "PREFECT_SERVER_ANALYTICS_ENABLED", "SIMPAIR_DEBUG")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    env.update(extra)
    return env


def _simpair(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("simpair", path=str(Path(sys.executable).parent)) or "simpair"
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def test_a_failed_command_prints_one_error_line_and_the_traceback_only_with_debug(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    plain = _simpair("train", "--config", missing, env=_clean_env())
    assert plain.returncode == 1
    assert "Traceback" not in plain.stderr + plain.stdout
    assert plain.stderr.strip().splitlines() == [
        f"error: FileNotFoundError: [Errno 2] No such file or directory: '{missing}' "
        "(--debug for the traceback)"
    ]

    debug = _simpair("--debug", "train", "--config", missing, env=_clean_env())
    assert debug.returncode == 1
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert debug.stderr.strip().splitlines()[-1] == (
        f"error: FileNotFoundError: [Errno 2] No such file or directory: '{missing}'"
    )


def test_simpair_debug_in_the_environment_prints_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from simpair.cli import app, failures

    monkeypatch.setenv("SIMPAIR_DEBUG", "1")
    try:
        with pytest.raises(SystemExit) as ended:
            app(["train", "--config", str(tmp_path / "missing.yaml")], prog_name="simpair")
    finally:
        failures.set_debug(False)
    assert ended.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err and "FileNotFoundError" in err


def test_the_command_line_sets_its_quiet_defaults_before_prefect() -> None:
    code = (
        "import os, sys, simpair.cli; "
        "assert 'prefect' not in sys.modules; "
        "print(os.environ['HF_HUB_OFFLINE'], os.environ['TOKENIZERS_PARALLELISM'], "
        "os.environ['PREFECT_SERVER_ANALYTICS_ENABLED'])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_clean_env())
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "false", "false"]

    # a value the user set wins
    mine = _clean_env(TOKENIZERS_PARALLELISM="true")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=mine)
    assert run.stdout.split() == ["1", "true", "false"]
