"""`--dask-address` against a real Dask deployment: `dask scheduler` + two `dask worker` processes.

The LocalCluster test (test_scoring_flow.py) starts its cluster inside the flow; production points
the flow at a scheduler somebody else runs. Here the scheduler and workers are separate processes
started with the `dask` CLI on 127.0.0.1 (free ports), exactly as an operator would, and the flow
only gets `tcp://127.0.0.1:PORT`. The output must equal the default task runner's, row by row, and
the chunks must really have run on the workers (each worker process loaded the pinned model).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_scoring_support as support
from test_scoring_support import (
    assert_exactly_once,
    assert_same_outputs,
    make_pairs,
    outputs_by_name,
    write_batch,
)

from simpair.flows.launch import score as run_flow
from simpair.ops.local_stack import free_port

tiny_cross = support.tiny_cross
DASK = str(Path(sys.executable).with_name("dask"))
REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _stop(procs: list[subprocess.Popen]) -> None:
    """Workers first, then the scheduler; SIGTERM, then SIGKILL for anything that hangs."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[str]:
    """A Dask scheduler and two single-threaded workers as subprocesses; yields the scheduler address."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{free_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    common = {"cwd": REPO, "env": env, "stdout": subprocess.DEVNULL}
    port = address.rsplit(":", 1)[1]
    procs = [
        subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard", "--no-show"],
            stderr=(logs / "scheduler.log").open("wb"),
            **common,
        )
    ]
    try:
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        DASK,
                        "worker",
                        address,
                        "--host",
                        "127.0.0.1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--name",
                        f"w{i}",
                        "--local-directory",
                        str(tmp_path / f"worker-{i}"),
                    ],  # fmt: skip
                    stderr=(logs / f"worker-{i}.log").open("wb"),
                    **common,
                )
            )
        deadline = time.monotonic() + 60
        while True:  # the scheduler binds its port a moment after the process starts
            try:
                with Client(address, timeout=5) as client:
                    client.wait_for_workers(2, timeout=max(1.0, deadline - time.monotonic()))
                break
            except OSError:
                dead = [p.args[1] for p in procs if p.poll() is not None]
                assert not dead, f"dask {dead} exited; logs in {logs}"
                assert time.monotonic() < deadline, f"no scheduler with 2 workers after 60 s; logs in {logs}"
                time.sleep(0.2)
        yield address
    finally:
        _stop(procs[::-1])


def test_flow_on_external_dask_scheduler_matches_default_runner(
    prefect_api: None, scheduler: str, tmp_path: Path, tiny_cross: Path
) -> None:
    from distributed import Client

    inbox = tmp_path / "inbox"
    tables = {
        "x.parquet": make_pairs(1500, seed=60, prefix="x"),
        "y.parquet": make_pairs(700, seed=61, prefix="y"),
    }
    for name, table in tables.items():
        write_batch(table, inbox / name, row_group_size=250)
    home = tmp_path / "home"

    plain = run_flow(str(inbox), tmp_path / "out-default", str(tiny_cross), home, chunk_rows=300, threads=1)
    dask = run_flow(
        str(inbox), tmp_path / "out-dask", str(tiny_cross), home, chunk_rows=300, threads=1,
        dask_address=scheduler,
    )  # fmt: skip

    for summary in (plain, dask):
        assert (summary.files_scored, summary.rows_scored, summary.rows_rejected) == (2, 2200, 0)
    # The chunks ran in the worker processes: each loaded the pinned model into its own cache.
    with Client(scheduler, timeout=10) as client:
        loaded = client.run(
            lambda: __import__("simpair.runtime.loader").runtime.loader._load.cache_info().currsize
        )
    assert len(loaded) == 2 and sum(loaded.values()) >= 1, loaded

    first, second = outputs_by_name(tmp_path / "out-default"), outputs_by_name(tmp_path / "out-dask")
    assert len(first) == 2
    assert_same_outputs(first, second)
    assert_exactly_once(tables["x.parquet"], next(t for n, t in second.items() if "/x-" in n))
    assert_exactly_once(tables["y.parquet"], next(t for n, t in second.items() if "/y-" in n))
