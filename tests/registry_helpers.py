"""Helpers shared by the registry-stage tests: an ingested home, tiny models, a real MLflow server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from simpair.catalog import Catalog
from simpair.models import ModelMetadata, save_tiny_model
from simpair.ops.local_stack import free_port, mlflow_server_argv, mlflow_server_env

MLFLOW_BIN = Path(sys.executable).with_name("mlflow")
HEALTHY_WITHIN = 240.0  # seconds for a fresh mlflow server to answer /health


def tiny_model(path: Path, home: Path, task: str = "paraphrase", kind: str = "cross", seed: int = 0) -> Path:
    """A tiny model whose metadata names the ingested dataset versions it was 'trained' on."""
    save_tiny_model(path, task=task, kind=kind, seed=seed)
    meta = ModelMetadata.read(path)
    dataset = "msrp" if task == "paraphrase" else "stsb"
    meta.dataset_versions = {dataset: Catalog(home).current_version(dataset)}
    meta.train_datasets = [dataset]
    meta.write(path)
    (path / "metrics.json").write_text('{"dev": {"accuracy": 0.5}}\n')
    return path


class MlflowServer:
    """A real `mlflow server` on 127.0.0.1 with a SQLite backend and artifact folder under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, port: int | None = None) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        log_path = self.root / f"server-{port}.log"
        server_env = mlflow_server_env()  # as the stack starts it: no GenAI job runner
        with log_path.open("w") as log:
            self.proc = subprocess.Popen(
                mlflow_server_argv(str(MLFLOW_BIN), port, self.root / "server.db", self.root / "artifacts"),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}, **server_env},
            )
        self.url = f"http://127.0.0.1:{port}"
        # generous: a loaded 2-core machine has taken over 90 s to import and start the server
        deadline = time.monotonic() + HEALTHY_WITHIN
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited early: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return self.url
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"mlflow server on {self.url} not healthy after {HEALTHY_WITHIN:.0f} s")
            time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL the server's process group (its workers included), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@contextlib.contextmanager
def mlflow_server(root: Path) -> Iterator[MlflowServer]:
    server = MlflowServer(root)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread: 2 cores shared by several test runs thrash badly with 2 threads each
    (measured: 0.5 s vs 8.5 s for the same tiny-model prediction under load)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
