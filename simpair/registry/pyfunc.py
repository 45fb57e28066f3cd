"""The servable form of a simpair model: an MLflow pyfunc around a saved model directory.

The model directory (safetensors weights, tokenizer, `config.json`, `simpair.json`) is logged as a pyfunc
*artifact*, and the wrapper is logged with MLflow's models-from-code (`_pyfunc_entry.py`) instead of
cloudpickle: nothing executable is unpickled at load time, and the weights are only ever read with
safetensors. Prediction goes through `simpair.predictors.load_predictor`, the same object `simpair predict`
uses, so `mlflow.pyfunc.load_model(uri).predict(df)` gives the same numbers as the CLI.
"""

from __future__ import annotations

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


def signature_for(task: str) -> ModelSignature:
    """Input: two string columns. Output: score in [0, 1]; paraphrase models add probability and label."""
    inputs = Schema([ColSpec("string", "text_a"), ColSpec("string", "text_b")])
    outputs = [ColSpec("float", "score")]
    if task == "paraphrase":
        outputs += [ColSpec("float", "probability"), ColSpec("integer", "label")]
    params = ParamSchema([ParamSpec("batch_size", "long", 64)])
    return ModelSignature(inputs=inputs, outputs=Schema(outputs), params=params)


def predictions_frame(task: str, out: dict[str, Any]) -> pd.DataFrame:
    """The predictor's arrays as the pyfunc output frame, in the column order of the signature."""
    frame = pd.DataFrame({"score": out["score"].astype("float32")})
    if task == "paraphrase":
        frame["probability"] = out["probability"].astype("float32")
        frame["label"] = out["label"].astype("int32")
    return frame


def _texts(column: pd.Series) -> list[str]:
    """Strings of a column; a missing cell (an empty CSV field reads as NaN) is the empty text."""
    values = column.astype(object)
    return values.where(values.notna(), "").map(str).tolist()


class SimpairPyfuncModel(PythonModel):
    """Loads the predictor from the logged artifact folder once; predicts a frame of text pairs."""

    def load_context(self, context: PythonModelContext) -> None:
        from simpair.predictors import load_predictor

        self._predictor = load_predictor(Path(context.artifacts[MODEL_DIR_ARTIFACT]))

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


def _pin(package: str) -> str:
    try:
        return f"{package}=={importlib_metadata.version(package)}"
    except importlib_metadata.PackageNotFoundError:
        return package


def pip_requirements() -> list[str]:
    """Explicit requirements (no inference: inferring would load the model in a subprocess at log time)."""
    packages = ["mlflow", "torch", "transformers", "safetensors", "tokenizers", "pandas", "numpy", "pydantic"]
    return [_pin(p) for p in packages] + ["simpair"]


def log_pyfunc(model_dir: Path, task: str, name: str = "model", registered_model_name: str | None = None):
    """Log `model_dir` as a pyfunc in the active run (optionally registering it); return ModelInfo."""
    example = pd.DataFrame(
        {"text_a": ["A man is playing a guitar."], "text_b": ["Someone plays the guitar."]}
    )
    return mlflow.pyfunc.log_model(
        name=name,
        python_model=str(ENTRY_FILE),
        artifacts={MODEL_DIR_ARTIFACT: str(Path(model_dir).resolve())},
        signature=signature_for(task),
        input_example=example,
        pip_requirements=pip_requirements(),
        registered_model_name=registered_model_name,
    )
