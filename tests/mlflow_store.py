"""An empty MLflow SQLite store, migrated once per test process and copied into each new home.

MLflow makes a new SQLite store by running its schema migrations: about 3.5 s of CPU here, paid by
every test whose fresh home touches tracking. A copy of a store that this same MLflow migrated is the
same database (0.1 s). Its default experiment keeps artifacts in the session's temporary folder, not
in `./mlruns` of the checkout. Only embedded stores are seeded: an `mlflow server` makes its own,
since its default experiment points at the server's artifact proxy.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import cache
from pathlib import Path


@cache
def _template() -> Path:
    from mlflow.store.model_registry.sqlalchemy_store import SqlAlchemyStore as RegistryStore
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    root = Path(tempfile.mkdtemp(prefix="simpair-mlflow-template-"))
    uri = f"sqlite:///{root / 'mlflow.db'}"
    SqlAlchemyStore(uri, (root / "mlruns").as_uri()).engine.dispose()
    RegistryStore(uri).engine.dispose()
    return root / "mlflow.db"


def seed_store(home: Path) -> Path:
    """`<home>/mlflow/mlflow.db` (where simpair's embedded store lives), ready to use; returns it."""
    target = home / "mlflow" / "mlflow.db"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_template(), target)
    return target
