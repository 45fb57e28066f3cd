"""Where simpair reads from and writes to.

Every location has one resolution order: explicit argument, then environment variable, then a
default inside the project checkout, so a fresh clone runs with no configuration at all. Shipped
files (training configs, nightly profiles, data contracts) come from the checkout when there is one,
else from the copies the wheel installs beside this package.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent


def shipped_path(relative: str | Path) -> Path:
    """A project file named from the checkout root (`configs/nightly.yaml`), checkout or installed.

    An absolute path is returned as it is. A relative one resolves against the checkout when the
    file is there, else against the installed package (the wheel carries `configs/` and
    `data_contracts/` as package data), so profiles and their training configs resolve either way.
    """
    path = Path(relative)
    if path.is_absolute():
        return path
    checkout = PROJECT_ROOT / path
    installed = PACKAGE_DIR / path
    return installed if not checkout.exists() and installed.exists() else checkout


def configs_dir() -> Path:
    """Shipped training configs and nightly profiles (`configs/`, checkout or installed)."""
    return shipped_path("configs")


def sources_dir(explicit: str | Path | None = None) -> str | Path:
    """Raw files: `--sources`, else `$SIMPAIR_SOURCES`, else `../shared/data` of the checkout.

    A local folder comes back as an absolute Path; an fsspec URL (`s3://bucket/raw`) as the string.
    """
    value = explicit or os.environ.get("SIMPAIR_SOURCES") or PROJECT_ROOT.parent / "shared" / "data"
    if "://" in str(value) and not str(value).startswith("file://"):
        return str(value)
    return Path(str(value).removeprefix("file://")).expanduser().resolve()


def home_dir(explicit: str | Path | None = None) -> Path:
    """Everything the pipeline writes: `--home`, else `$SIMPAIR_HOME`, else `.simpair/` in the checkout."""
    value = explicit or os.environ.get("SIMPAIR_HOME") or PROJECT_ROOT / ".simpair"
    path = Path(value).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def contracts_dir(explicit: str | Path | None = None) -> Path:
    """Data contracts (YAML): `--contracts`, else `$SIMPAIR_CONTRACTS`, else `data_contracts/`."""
    value = explicit or os.environ.get("SIMPAIR_CONTRACTS") or shipped_path("data_contracts")
    return Path(value).expanduser().resolve()


def tracking_uri(home: str | Path | None = None) -> str:
    """MLflow tracking URI: `$MLFLOW_TRACKING_URI`, else a SQLite store under the pipeline home."""
    explicit = os.environ.get("MLFLOW_TRACKING_URI")
    if explicit:
        return explicit
    return f"sqlite:///{home_dir(home) / 'mlflow' / 'mlflow.db'}"


def artifact_root(home: str | Path | None = None) -> Path:
    """Local MLflow artifact folder used with the embedded SQLite store."""
    return home_dir(home) / "mlflow" / "artifacts"
