"""The servable form of a simpair model: an MLflow pyfunc around a saved model directory.

The model directory (safetensors weights, tokenizer, `config.json`, `simpair.json`) is logged as a pyfunc
*artifact*, and the wrapper (`simpair.runtime.pyfunc_model`) is logged with MLflow's models-from-code
(`simpair/runtime/pyfunc_entry.py`) instead of cloudpickle: nothing executable is unpickled at load
time, and the weights are only ever read with safetensors. This module only logs it: the signature,
the pinned requirements and the staged code.

The model also carries simpair's domain package (`code_paths`) and pins only third-party packages in its
requirements, so it loads and serves (`mlflow models serve`) where simpair is not installed.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import metadata as importlib_metadata
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

from simpair.models.metadata import MODEL_DIR_ARTIFACT

# the models-from-code entry MLflow executes at load time; it lives with the loader (`simpair.runtime`)
ENTRY_FILE = Path(__file__).resolve().parents[1] / "runtime" / "pyfunc_entry.py"


def signature_for(task: str, kind: str | None = None) -> ModelSignature:
    """Input: two string columns. Output: score in [0, 1]; paraphrase models add probability and label,
    a cascade the stage that scored each pair (`scored_by`: `bi` or `cross`)."""
    inputs = Schema([ColSpec("string", "text_a"), ColSpec("string", "text_b")])
    outputs = [ColSpec("float", "score")]
    if task == "paraphrase":
        outputs += [ColSpec("float", "probability"), ColSpec("integer", "label")]
    if kind == "cascade":
        outputs.append(ColSpec("string", "scored_by"))
    params = ParamSchema([ParamSpec("batch_size", "long", 64)])
    return ModelSignature(inputs=inputs, outputs=Schema(outputs), params=params)


# The third-party distributions the pyfunc's code imports when it loads and predicts (simpair's domain
# modules reached from `simpair.runtime.loader`, ensembles included). Pinned to the versions the model was
# trained with. `simpair` itself is not here: no index serves it, its code travels in the model (`code/`).
# tests/test_pyfunc_serving.py checks this list against the imports of the modules a served model loads.
REQUIREMENTS = (
    "mlflow",
    "torch",
    "transformers",
    "safetensors",
    "tokenizers",
    "numpy",
    "pandas",
    "pydantic",
    "pyyaml",
    "polars",
    "pyarrow",
    "scipy",
    "scikit-learn",
    "tqdm",
    "filelock",
    "platformdirs",  # simpair.settings: the home outside a checkout
)
# Top-level folders of the installed `simpair` package that are not the domain: the orchestration and
# operations layers (`simpair.cli`, `.tasks`, `.ops`, `.flows` import Prefect) and package data. The
# pyfunc needs none of them.
NOT_SHIPPED = frozenset({"cli", "tasks", "ops", "flows", "configs", "data_contracts"})
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _pin(package: str) -> str:
    """`package==X.Y.Z` at the installed version, without a local label (`2.13.0+cpu` -> `2.13.0`)."""
    try:
        version = importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return package
    return f"{package}=={version.split('+', 1)[0]}"


def pip_requirements() -> list[str]:
    """Explicit requirements (no inference: inferring would load the model in a subprocess at log time)."""
    return [_pin(p) for p in REQUIREMENTS]


def stage_code(dest: Path) -> Path:
    """Copy the domain package to `dest/simpair` (no orchestration layers, no bytecode) for `code_paths`."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}
        if Path(folder).resolve() == PACKAGE_DIR:
            skipped |= NOT_SHIPPED & set(names)
        return skipped

    target = Path(dest) / "simpair"
    shutil.copytree(PACKAGE_DIR, target, ignore=ignore)
    return target


def _kind(model_dir: Path) -> str | None:
    from simpair.models.metadata import ModelMetadata

    try:
        return ModelMetadata.read(Path(model_dir)).kind
    except (FileNotFoundError, ValueError):
        return None


def log_pyfunc(model_dir: Path, task: str, name: str = "model", registered_model_name: str | None = None):
    """Log `model_dir` as a pyfunc in the active run (optionally registering it); return ModelInfo.

    The model carries everything it needs besides its pip requirements: the weights (`artifacts/`) and
    simpair's domain code (`code/simpair`, put on `sys.path` by MLflow at load time), so
    `mlflow models serve` works in an environment built from `requirements.txt` alone.
    """
    example = pd.DataFrame(
        {"text_a": ["A man is playing a guitar."], "text_b": ["Someone plays the guitar."]}
    )
    with tempfile.TemporaryDirectory(prefix="simpair-code-") as staging:
        code = stage_code(Path(staging))
        return mlflow.pyfunc.log_model(
            name=name,
            python_model=str(ENTRY_FILE),
            artifacts={MODEL_DIR_ARTIFACT: str(Path(model_dir).resolve())},
            code_paths=[str(code)],
            signature=signature_for(task, _kind(model_dir)),
            input_example=example,
            pip_requirements=pip_requirements(),
            registered_model_name=registered_model_name,
        )
