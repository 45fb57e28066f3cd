"""The MLflow pyfunc wrapper: loads a logged model folder through the one loader and predicts a frame.

Prediction goes through `simpair.runtime.loader.load_predictor`, the same object `simpair predict`
uses, so `mlflow.pyfunc.load_model(uri).predict(df)` gives the same numbers as the CLI. It serves in the
precision the model's stored precision verdict chose (`served_precision`), as `simpair score` does by
default, among the rungs plain torch runs (fp32, and bf16 where native): int8 needs ONNX Runtime,
which a served model does not install. Logged by `simpair.registry.pyfunc`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.pyfunc import PythonModel, PythonModelContext

from simpair.models.metadata import MODEL_DIR_ARTIFACT

INPUT_COLUMNS = ("text_a", "text_b")


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

    from simpair.models.device import host_facts, native_bf16, pick_device
    from simpair.models.precision_verdict import PrecisionVerdict, host_differences

    verdict = PrecisionVerdict.read(model_dir)
    if verdict is None or host_differences(verdict.host, host_facts(pick_device("auto"))):
        return "fp32"  # none, or measured on another host (another CPU or runtime): fp32 until measured here
    torch_rungs = tuple(r for r in verdict.rungs if r.recheck_band is None and r.runtime in (None, "torch"))
    plain = dataclasses.replace(verdict, rungs=torch_rungs)
    return plain.choose(("fp32", "bf16") if native_bf16(pick_device("auto")) else ("fp32",)).precision


class SimpairPyfuncModel(PythonModel):
    """Loads the predictor from the logged artifact folder once; predicts a frame of text pairs."""

    def load_context(self, context: PythonModelContext) -> None:
        from simpair.runtime.loader import load_predictor

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
