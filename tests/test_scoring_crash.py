"""Exactly-once under real process failure: SIGKILL mid-file, then re-runs; two runs at once.

The scoring runs are real `simpair score` subprocesses on a real tiny model; the test only watches the
ledger and sends signals. The output is then checked row by row.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import test_scoring_support as support
from test_scoring_support import assert_exactly_once, make_pairs, read_outputs, read_rejects, write_batch

from simpair.runtime.loader import load_predictor

tiny_cross = support.tiny_cross
SIMPAIR = str(Path(sys.executable).with_name("simpair"))
pytestmark = pytest.mark.slow


def _cmd(inbox: Path, out: Path, model: Path, *extra: str) -> list[str]:
    return [SIMPAIR, "score", "--inbox", str(inbox), "--out", str(out), "--model", str(model),
            "--chunk-rows", "500", "--threads", "1", "--no-prefect", *extra]  # fmt: skip


def _chunks_done(out: Path) -> int:
    path = out / "_ledger" / "ledger.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    except sqlite3.OperationalError:  # tables not created yet
        return 0


def _wait_chunks(out: Path, proc: subprocess.Popen, at_least: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while _chunks_done(out) < at_least:
        assert proc.poll() is None, f"scoring exited early ({proc.returncode}) before {at_least} chunks"
        assert time.monotonic() < deadline, "scoring made no progress"
        time.sleep(0.02)


def _batch_with_bad_rows(n: int, seed: int) -> tuple[pa.Table, set[str]]:
    table = make_pairs(n, seed=seed)
    text_b = table.column("text_b").to_pylist()
    bad = {7: None, 5_555: "  ", 7_777: None}
    for row, value in bad.items():
        text_b[row] = value
    table = table.set_column(2, "text_b", pa.array(text_b, pa.string()))
    return table, {f"p{row:07d}" for row in bad}


def test_sigkill_mid_file_then_rerun_scores_every_row_exactly_once(tmp_path: Path, tiny_cross: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table, rejected = _batch_with_bad_rows(8_000, seed=11)
    write_batch(table, inbox / "big.parquet", row_group_size=1300)  # chunks of 500 cut row groups
    small = make_pairs(500, seed=12, prefix="s")
    write_batch(small, inbox / "small.parquet")

    for kill_at in (3, 9):  # two crashes at different points of the same file
        proc = subprocess.Popen(
            _cmd(inbox, out, tiny_cross), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_chunks(out, proc, kill_at)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        assert not list(out.glob("date=*/big-*.parquet")), "killed before the file was finalized"

    summary_file = tmp_path / "summary.json"
    done = subprocess.run(
        _cmd(inbox, out, tiny_cross, "--json", str(summary_file)), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(summary_file.read_text())
    assert summary["files_scored"] >= 1
    assert summary["rows_scored_this_run"] < 8_000 - len(rejected), "the re-run must resume, not restart"

    output = read_outputs(out)
    big = output.filter(pa.compute.starts_with(output.column("pair_id"), "p"))
    assert_exactly_once(table, big, rejected)
    assert_exactly_once(small, output.filter(pa.compute.starts_with(output.column("pair_id"), "s")))
    rejects = read_rejects(out)
    assert rejects is not None and sorted(rejects.column("pair_id").to_pylist()) == sorted(rejected)
    assert len(set(big.column("run_id").to_pylist())) >= 2  # chunks from the killed runs were kept
    assert not list((out / "_staging").glob("*/*"))

    # scores are the model's, whichever run wrote them (every 97th row, to keep the test short)
    keep = [i for i, pid in enumerate(table.column("pair_id").to_pylist()) if pid not in rejected][::97]
    sample = table.take(keep)
    expected = load_predictor(tiny_cross).predict(
        sample.column("text_a").to_pylist(), sample.column("text_b").to_pylist()
    )
    got = big.take([i for i in range(len(big))][::97]).column("score").to_numpy()
    np.testing.assert_allclose(got, expected["score"], atol=1e-5)


def test_two_runs_at_once_second_exits_or_waits_never_double_scores(tmp_path: Path, tiny_cross: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(3000, seed=13)
    write_batch(table, inbox / "b.parquet")

    first = subprocess.Popen(
        _cmd(inbox, out, tiny_cross), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait_chunks(out, first, 1)
    first.send_signal(signal.SIGSTOP)  # frozen mid-run, still holding the lock
    try:
        refused = subprocess.run(_cmd(inbox, out, tiny_cross, "--wait", "0"), capture_output=True, text=True)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert (
            refused.stderr.startswith("error: not started: ")
            and "another scoring run holds" in refused.stderr
        )
        waiting = subprocess.Popen(
            _cmd(inbox, out, tiny_cross, "--wait", "300", "--json", str(tmp_path / "second.json")),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(1.0)
        assert waiting.poll() is None, "the waiting run must wait for the lock"
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(180) == 0
    assert waiting.wait(180) == 0, waiting.stdout.read() if waiting.stdout else ""
    second = json.loads((tmp_path / "second.json").read_text())
    assert (second["files_scored"], second["files_skipped"], second["rows_scored_this_run"]) == (0, 1, 0)
    assert_exactly_once(table, read_outputs(out))
