"""Where simpair reads and writes: the checkout's defaults in a clone, the user's folders when installed.

The installed case runs the real `simpair/settings.py` from a copy laid out as a wheel lays it out
(`<venv>/lib/python3.11/site-packages/simpair/`), in a subprocess, so `PACKAGE_DIR` and the checkout
detection see exactly what an installed copy sees; nothing is patched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simpair import settings
from simpair.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _installed_copy(tmp_path: Path) -> Path:
    """A site-packages holding simpair's settings module as a wheel installs it (with package data)."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    package = site / "simpair"
    (package / "configs").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy2(ROOT / "simpair" / "settings.py", package / "settings.py")
    shutil.copy2(ROOT / "configs" / "nightly.yaml", package / "configs" / "nightly.yaml")
    # something else in site-packages happens to be called configs/: never mistaken for simpair's
    (site / "configs").mkdir()
    (site / "configs" / "nightly.yaml").write_text("not: simpair's\n")
    # and a pyproject.toml naming simpair above the package, which an installed copy must not take
    # for a checkout either
    (site / "pyproject.toml").write_text('[project]\nname = "simpair"\n')
    return site


def _probe(site: Path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SIMPAIR_", "MLFLOW_", "XDG_"))}
    return subprocess.run(
        [sys.executable, "-c", "import simpair.settings as s\n" + code],
        cwd=site.parent,
        env={**clean, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_installed_home_is_the_user_data_dir_and_sources_have_no_default(tmp_path: Path) -> None:
    site = _installed_copy(tmp_path)
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    data = tmp_path / "xdg-data"
    code = (
        "import json\n"
        "try:\n    s.sources_dir(); sources = 'no error'\n"
        "except s.NoSources as exc:\n    sources = str(exc)\n"
        "print(json.dumps({'file': s.__file__, 'checkout': str(s.CHECKOUT), 'home': str(s.home_dir()),"
        " 'configs': str(s.configs_dir()), 'contracts': str(s.contracts_dir()), 'sources': sources,"
        " 'tracking': s.tracking_uri(), 'is_value_error': issubclass(s.NoSources, ValueError)}))\n"
    )
    done = _probe(site, code, {"XDG_DATA_HOME": str(data)})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert Path(facts["file"]).is_relative_to(site)
    assert facts["checkout"] == "None"
    assert facts["home"] == str(data / "simpair") and (data / "simpair").is_dir()
    assert facts["tracking"] == f"sqlite:///{data / 'simpair' / 'mlflow' / 'mlflow.db'}"
    assert facts["configs"] == str(site / "simpair" / "configs")
    assert facts["contracts"] == str(site / "simpair" / "data_contracts")
    assert facts["is_value_error"]
    assert "\n" not in facts["sources"]
    assert "--sources" in facts["sources"] and "SIMPAIR_SOURCES" in facts["sources"]
    # nothing was written beside the package
    assert sorted(p.relative_to(site) for p in site.rglob("*")) == before


def test_installed_copy_takes_the_environment_and_explicit_values(tmp_path: Path) -> None:
    site = _installed_copy(tmp_path)
    home, sources = tmp_path / "team-home", tmp_path / "raw"
    code = "print(s.home_dir(create=False)); print(s.sources_dir()); print(s.sources_dir('s3://bucket/raw'))"
    done = _probe(site, code, {"SIMPAIR_HOME": str(home), "SIMPAIR_SOURCES": str(sources)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(home), str(sources), "s3://bucket/raw"]
    assert not home.exists()  # create=False names the home without making it


def test_checkout_keeps_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SIMPAIR_HOME", "SIMPAIR_SOURCES"):
        monkeypatch.delenv(name, raising=False)
    assert settings.CHECKOUT == ROOT and settings.in_checkout()
    assert settings.home_dir(create=False) == ROOT / ".simpair"
    assert settings.sources_dir() == (ROOT.parent / "shared" / "data").resolve()
    assert settings.shipped_path("configs/nightly.yaml") == ROOT / "configs" / "nightly.yaml"


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ("checkout", True),
        ("site-packages", False),  # a wheel's copy, even with a stray pyproject.toml above it
        ("dist-packages", False),  # Debian's Python
        ("other-project", False),  # a project of the user's that vendors a `simpair/` folder
        ("no-pyproject", False),
    ],
)
def test_checkout_detection(tmp_path: Path, layout: str, expected: bool) -> None:
    base = tmp_path / "lib" / "python3.11" / layout if layout.endswith("packages") else tmp_path / layout
    package = base / "simpair"
    package.mkdir(parents=True)
    name = "their-app" if layout == "other-project" else "simpair"
    if layout != "no-pyproject":
        (base / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
    assert settings.is_checkout(base, package) is expected


def test_version_option_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"simpair {version('simpair')}\n"


def test_info_reports_without_creating_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "not-yet"
    monkeypatch.setenv("SIMPAIR_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("SIMPAIR_SOURCES", str(tmp_path / "raw"))
    result = CliRunner().invoke(app, ["info", "--json", "-"])
    assert result.exit_code == 0, result.output
    facts = json.loads(result.output)
    assert facts["home"] == str(home) and facts["home_exists"] is False
    assert facts["tracking_uri"] == f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    assert facts["sources"] == str(tmp_path / "raw")
    assert facts["checkout"] == str(ROOT)
    assert facts["device"]["kind"] in ("cpu", "cuda")
    assert set(facts["backends"]) == {
        "onnxruntime",
        "openvino",
        "faiss",
        "s3fs",
        "sentence-transformers",
        "prefect-dask",
    }
    assert facts["backends"]["onnxruntime"]  # a core dependency: always there
    assert not home.exists()

    out = tmp_path / "info.json"
    text = CliRunner().invoke(app, ["info", "--json", str(out)])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert any(line.startswith("home:") and str(home) in line for line in lines)
    assert any(line.startswith("device:") for line in lines)
    assert json.loads(out.read_text())["home"] == str(home)
    assert not home.exists()
