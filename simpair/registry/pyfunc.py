"""The servable form of a simpair model: an MLflow pyfunc around a saved model directory.

The model directory (safetensors weights, tokenizer, `config.json`, `simpair.json`) is logged as a pyfunc
*artifact*, and the wrapper is logged with MLflow's models-from-code (`_pyfunc_entry.py`) instead of
cloudpickle: nothing executable is unpickled at load time, and the weights are only ever read with
safetensors. Prediction goes through `simpair.predictors.load_predictor`, the same object `simpair predict`
uses, so `mlflow.pyfunc.load_model(uri).predict(df)` gives the same numbers as the CLI. It serves in the
precision the model's cached precision verdict chose (`served_precision`), as `simpair score` does by
default, among the rungs plain torch runs (fp32, and bf16 where native): int8 needs ONNX Runtime,
which a served model does not install.

The model also carries simpair's domain package (`code_paths`) and pins only third-party packages in its
requirements, so it loads and serves (`mlflow models serve`) where simpair is not installed.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.pyfunc import PythonModel, PythonModelContext
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

MODEL_DIR_ARTIFACT = "model_dir"
ENTRY_FILE = Path(__file__).with_name("_pyfunc_entry.py")
INPUT_COLUMNS = ("text_a", "text_b")


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


def predictions_frame(task: str, out: dict[str, Any]) -> pd.DataFrame:
    """The predictor's arrays as the pyfunc output frame, in the column order of the signature."""
    frame = pd.DataFrame({"score": out["score"].astype("float32")})
    if task == "paraphrase":
        frame["probability"] = out["probability"].astype("float32")
        # a model imported with no dev file has no threshold: the label column is there, and empty
        label = out.get("label")
        frame["label"] = pd.array([None] * len(frame), "Int32") if label is None else label.astype("int32")
    if "scored_by" in out:
        frame["scored_by"] = [str(stage) for stage in out["scored_by"]]
    return frame


def _texts(column: pd.Series) -> list[str]:
    """Strings of a column; a missing cell (an empty CSV field reads as NaN) is the empty text."""
    values = column.astype(object)
    return values.where(values.notna(), "").map(str).tolist()


def served_precision(model_dir: Path) -> str:
    """`auto` for a served model: the verdict's fastest accepted torch rung here; fp32 without one.

    The pyfunc runs the plain torch forward pass, so a rung judged on anything else is not served: one
    accepted only with an fp32 recheck near the threshold (`simpair.runtime.recheck`; the plain pass is
    what the ladder refused), or a bf16 rung measured on OpenVINO (whose bf16 kernels round differently
    from torch's autocast, and which is not among a served model's packages).
    """
    import dataclasses

    from simpair.models.device import native_bf16, pick_device
    from simpair.models.precision_verdict import PrecisionVerdict

    verdict = PrecisionVerdict.read(model_dir)
    if verdict is None:
        return "fp32"
    torch_rungs = tuple(r for r in verdict.rungs if r.recheck_band is None and r.runtime in (None, "torch"))
    plain = dataclasses.replace(verdict, rungs=torch_rungs)
    return plain.choose(("fp32", "bf16") if native_bf16(pick_device("auto")) else ("fp32",)).precision


class SimpairPyfuncModel(PythonModel):
    """Loads the predictor from the logged artifact folder once; predicts a frame of text pairs."""

    def load_context(self, context: PythonModelContext) -> None:
        from simpair.predictors import load_predictor

        model_dir = Path(context.artifacts[MODEL_DIR_ARTIFACT])
        self._predictor = load_predictor(model_dir, precision=served_precision(model_dir))

    def predict(
        self, context: PythonModelContext, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        missing = [c for c in INPUT_COLUMNS if c not in model_input.columns]
        if missing:
            raise ValueError(f"input is missing column(s) {missing}; expected {list(INPUT_COLUMNS)}")
        batch_size = int((params or {}).get("batch_size", 64))
        text_a, text_b = _texts(model_input["text_a"]), _texts(model_input["text_b"])
        out = self._predictor.predict(text_a, text_b, batch_size=batch_size)
        return predictions_frame(self._predictor.task, out)


# The third-party distributions the pyfunc's code imports when it loads and predicts (simpair's domain
# modules reached from `simpair.predictors`, ensembles included). Pinned to the versions the model was
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
# Top-level folders of the installed `simpair` package that are not the domain: the orchestration layers
# (`simpair.cli`, `.tasks`, `.flows` import Prefect) and package data. The pyfunc needs none of them.
NOT_SHIPPED = frozenset({"cli", "tasks", "flows", "configs", "data_contracts"})
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
