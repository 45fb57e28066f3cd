"""Shared test set-up.

Every test runs with an isolated pipeline home, an isolated MLflow store and Prefect home, and no
network access to any model hub. Prefect's temporary API server is started once per session, and
only for tests that ask for it (`prefect_api`), so pure domain tests never pay its start-up cost.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow_store import seed_store

_SESSION_TMP = Path(tempfile.mkdtemp(prefix="simpair-tests-"))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
# Tests use tiny models in several processes at once (Prefect server, MLflow server, workers):
# on 2 cores, one torch thread per process avoids oversubscription that made predictions 18x slower.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["PREFECT_HOME"] = str(_SESSION_TMP / "prefect-home")
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.pop("PREFECT_API_URL", None)
os.environ.pop("MLFLOW_TRACKING_URI", None)
os.environ.pop("SIMPAIR_HOME", None)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The raw public files, read in place (never copied into the repo)."""
    if not (SHARED_DATA / "msrp" / "msr_paraphrase_train.txt").exists():
        pytest.fail(f"raw data not found at {SHARED_DATA}; tests read it from ../shared/data")
    return SHARED_DATA


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh pipeline home (SIMPAIR_HOME) with its own embedded MLflow store (MLFLOW_TRACKING_URI),
    already migrated (`mlflow_store.seed_store`). A test of what a brand-new home holds makes its own."""
    path = tmp_path / "home"
    seed_store(path)
    monkeypatch.setenv("SIMPAIR_HOME", str(path))
    # mlflow.set_tracking_uri exports MLFLOW_TRACKING_URI; pin it per test so no store leaks between tests.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{path / 'mlflow' / 'mlflow.db'}")
    return path


@pytest.fixture(autouse=True)
def _torch_threads_put_back() -> Iterator[None]:
    """Each test leaves torch's thread count as it found it: loading a model for scoring sets it to
    every core for the process, and a pytest worker that kept that ran every later test's small
    forward passes on spinning threads while three other workers shared the two cores."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else int(os.environ.get("OMP_NUM_THREADS", "1"))
    yield
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread for the test (tiny models run fastest so; the machine is shared), then restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One temporary Prefect API for the whole session, Prefect's own test harness, started on a copy
    of a database migrated once per run (`prefect_template`): 6 CPU s to start instead of 16."""
    import prefect.testing.utilities as harness
    from prefect.settings import PREFECT_API_BLOCKS_REGISTER_ON_START, temporary_settings
    from prefect_template import migrated_database, seeded_dir

    base = tmp_path_factory.getbasetemp()
    template = migrated_database(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
    with pytest.MonkeyPatch.context() as patch:  # the harness names its database folder with mkdtemp
        patch.setattr(harness, "mkdtemp", lambda: str(seeded_dir(template, base / "prefect-api")))
        with (
            temporary_settings(updates={PREFECT_API_BLOCKS_REGISTER_ON_START: False}),
            harness.prefect_test_harness(server_startup_timeout=120),
        ):
            patch.undo()
            yield


def _register_hypothesis_profiles() -> None:
    """CI runs a fixed set of generated examples (a landing must not hinge on a lucky draw);
    `pytest --hypothesis-profile=explore` searches fresh random examples, as a developer should
    before changing the ingest reader. Edge cases found that way are pinned with `@example`."""
    from hypothesis import settings

    settings.register_profile("default", derandomize=True)
    settings.register_profile("explore", derandomize=False)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


_register_hypothesis_profiles()


MOTO = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")


@pytest.fixture
def s3_env() -> Iterator[dict[str, str]]:
    """A moto S3 server in its own process; yields the environment a client needs to reach it."""
    if MOTO is None or importlib.util.find_spec("s3fs") is None:
        pytest.fail("moto_server or s3fs not found: install the dev extra (moto[server], s3fs)")
    from simpair.ops.local_stack import free_port

    port = free_port()
    proc = subprocess.Popen(
        [MOTO, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, f"moto_server exited: {proc.stderr.read().decode()[-2000:]}"
                assert time.monotonic() < deadline, "moto_server did not answer within 30 s"
                time.sleep(0.1)
        yield {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "simpair-test",
            "AWS_SECRET_ACCESS_KEY": "simpair-test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# The longest files (a real stack, whole nights, crash-and-resume runs) start first: with several
# pytest workers (`make test` runs pytest-xdist by file, in this order) the suite then ends with short
# files on every worker, not one long file on one worker while the others idle (test_wheel_install.py,
# 127 s, is last by name). One file starts a real stack (both of its stories run on that one stack), so
# two stacks never run at once. Every file over about 75 s in `make test` on 2026-11-29, longest first.
LONGEST_FIRST = (
    "test_stack_e2e.py",
    "test_nightly.py",
    "test_nightly_stack.py",
    "test_scoring_crash.py",
    "test_scoring_s3.py",
    "test_training_ddp.py",
    "test_wheel_install.py",
    "test_cascade.py",
    "test_precision_ladder.py",
    "test_scoring_dask_server.py",
    "test_scoring_flow.py",
    "test_wise_ft_choice.py",
    "test_tracking.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))
