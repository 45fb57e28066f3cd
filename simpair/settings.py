"""Where simpair reads from and writes to, from a checkout or installed as a package.

Every location has one resolution order: explicit argument, then environment variable, then a
default. The default depends on where simpair runs from:

- inside its checkout (a clone, installed editable or not), the home is `.simpair/` in the checkout
  and the raw sources are `../shared/data`, so a fresh clone runs with no configuration at all;
- installed from a wheel, nothing is ever written beside the package: the home is the user data
  directory (`platformdirs`, e.g. `~/.local/share/simpair`), and there are no default sources, since
  a team's raw files live wherever it keeps them (`--sources` or `$SIMPAIR_SOURCES`).

Shipped files (training configs, nightly profiles, data contracts) come from the checkout when there
is one, else from the copies the wheel installs beside this package.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# The folder above the package: the checkout's root in a clone, site-packages when installed from a
# wheel. Code that means "the checkout" uses CHECKOUT, which is None when installed.
PROJECT_ROOT = PACKAGE_DIR.parent
SOURCES_HINT = "pass --sources FOLDER or set SIMPAIR_SOURCES"


class NoSources(ValueError):
    """A command needs raw sources and none were given (installed simpair has no default)."""


def is_checkout(root: Path, package_dir: Path) -> bool:
    """Whether `package_dir` is simpair's source folder inside a checkout rooted at `root`.

    A checkout has a pyproject.toml naming the project `simpair` beside the package; an installed
    package lives under site-packages (or Debian's dist-packages), whatever happens to lie around it.
    """
    if {"site-packages", "dist-packages"} & set(package_dir.parts):
        return False
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return project.get("name") == "simpair" and (root / package_dir.name) == package_dir


CHECKOUT: Path | None = PROJECT_ROOT if is_checkout(PROJECT_ROOT, PACKAGE_DIR) else None


def in_checkout() -> bool:
    """True when simpair runs from its source checkout (editable install or not), False from a wheel."""
    return CHECKOUT is not None


def shipped_path(relative: str | Path) -> Path:
    """A project file named from the checkout root (`configs/nightly.yaml`), checkout or installed.

    An absolute path is returned as it is. A relative one resolves against the checkout when there is
    one and the file is there, else against the installed package (the wheel carries `configs/` and
    `data_contracts/` as package data), so profiles and their training configs resolve either way.
    Installed, whatever else lies in site-packages is never looked at.
    """
    path = Path(relative)
    if path.is_absolute():
        return path
    installed = PACKAGE_DIR / path
    if CHECKOUT is None:
        return installed
    checkout = CHECKOUT / path
    return installed if not checkout.exists() and installed.exists() else checkout


def configs_dir() -> Path:
    """Shipped training configs and nightly profiles (`configs/`, checkout or installed)."""
    return shipped_path("configs")


def default_sources() -> Path | None:
    """`../shared/data` beside the checkout; None when installed (there is no default then)."""
    return None if CHECKOUT is None else CHECKOUT.parent / "shared" / "data"


def sources_dir(explicit: str | Path | None = None) -> str | Path:
    """Raw files: `--sources`, else `$SIMPAIR_SOURCES`, else `../shared/data` of the checkout.

    A local folder comes back as an absolute Path; an fsspec URL (`s3://bucket/raw`) as the string.
    Installed from a wheel there is no default: `NoSources` says in one line how to give them. Call
    it only in commands that read sources, so the others never ask for them.
    """
    value = explicit or os.environ.get("SIMPAIR_SOURCES") or default_sources()
    if not value:
        raise NoSources(f"no raw sources: {SOURCES_HINT}")
    if "://" in str(value) and not str(value).startswith("file://"):
        return str(value)
    return Path(str(value).removeprefix("file://")).expanduser().resolve()


def default_home() -> Path:
    """`.simpair/` in the checkout; installed, the user data directory (`~/.local/share/simpair`)."""
    if CHECKOUT is not None:
        return CHECKOUT / ".simpair"
    import platformdirs  # only installed copies need it; the import is cheap either way

    return platformdirs.user_data_path("simpair", appauthor=False)


def home_dir(explicit: str | Path | None = None, *, create: bool = True) -> Path:
    """Everything the pipeline writes: `--home`, else `$SIMPAIR_HOME`, else `default_home()`.

    The folder is created unless `create=False` (what `simpair info` uses: reporting writes nothing).
    """
    value = explicit or os.environ.get("SIMPAIR_HOME") or default_home()
    path = Path(value).expanduser().resolve()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def contracts_dir(explicit: str | Path | None = None) -> Path:
    """Data contracts (YAML): `--contracts`, else `$SIMPAIR_CONTRACTS`, else `data_contracts/`."""
    value = explicit or os.environ.get("SIMPAIR_CONTRACTS") or shipped_path("data_contracts")
    return Path(value).expanduser().resolve()


def tracking_uri(home: str | Path | None = None, *, create: bool = True) -> str:
    """MLflow tracking URI: `$MLFLOW_TRACKING_URI`, else a SQLite store under the pipeline home.

    Naming the URI opens nothing; with `create=False` not even the home folder is made.
    """
    explicit = os.environ.get("MLFLOW_TRACKING_URI")
    if explicit:
        return explicit
    return f"sqlite:///{home_dir(home, create=create) / 'mlflow' / 'mlflow.db'}"


def artifact_root(home: str | Path | None = None) -> Path:
    """Local MLflow artifact folder used with the embedded SQLite store."""
    return home_dir(home) / "mlflow" / "artifacts"
