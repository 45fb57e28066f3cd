"""Shared test set-up.

Every test runs with an isolated pipeline home, an isolated MLflow store and Prefect home, and no
network access to any model hub. Prefect's temporary API server is started once per session, and
only for tests that ask for it (`prefect_api`), so pure domain tests never pay its start-up cost.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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
    """A fresh pipeline home (SIMPAIR_HOME) with its own embedded MLflow store (MLFLOW_TRACKING_URI)."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("SIMPAIR_HOME", str(path))
    # mlflow.set_tracking_uri exports MLFLOW_TRACKING_URI; pin it per test so no store leaks between tests.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{path / 'mlflow' / 'mlflow.db'}")
    return path


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread for the test (tiny models run fastest so; the machine is shared), then restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[None]:
    """One temporary Prefect API for the whole session (its first start migrates SQLite: ~20 s)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
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
