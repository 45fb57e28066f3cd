"""Starting the CLI stays light: `simpair ingest` must not pay for torch and transformers.

Importing them cost about 7 s of CPU and 350 MB here, a third of a 2M-row ingest, although only
the commands that load a model need them; they load on first use instead (`simpair.models`).
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "mlflow", "prefect")


def test_cli_starts_without_torch_transformers_mlflow_or_prefect() -> None:
    code = (
        f"import sys; from simpair.cli import app; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"importing the CLI loaded: {done.stdout.strip()}"


def test_models_names_load_on_first_use() -> None:
    import simpair.models as models
    from simpair.models.metadata import METADATA_FILE

    assert sorted(models.__all__) == sorted(models._EXPORTS)
    assert models.METADATA_FILE == METADATA_FILE
