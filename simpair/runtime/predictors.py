"""Load any saved model directory for prediction: plain (cross, bi, soup), stacked or a cascade.

The one door from a model directory to scores: evaluation, the registry (gate, pyfunc), bulk scoring
and the CLI all call `load_predictor`. It sits above `simpair.ensemble` because it knows every model
kind; `simpair.models.Predictor.load` loads a single model and knows nothing of stacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from simpair.models.metadata import METADATA_FILE, ModelMetadata
from simpair.models.predictor import Predictor

if TYPE_CHECKING:
    from simpair.ensemble.cascade import CascadePredictor
    from simpair.ensemble.stacked import StackedPredictor


def load_predictor(
    model_dir: str | Path, device: str = "auto", precision: str = "fp32"
) -> Predictor | StackedPredictor | CascadePredictor:
    """Load a directory written by training (or `save_tiny_model`, or `simpair stack`) for prediction.

    A plain directory gives a `simpair.models.Predictor`; a stacked one gives a
    `simpair.ensemble.StackedPredictor` with the same public methods, its members loaded through
    this same function. Scores are fp32 unless `precision` asks otherwise (`bf16`, or `auto`: bf16
    on CUDA), on every device: evaluation, the promotion gate and the MLflow pyfunc produce metrics
    and decisions, and take this default; only bulk scoring opts in to bf16.
    """
    model_dir = Path(model_dir)
    kind = ModelMetadata.read(model_dir).kind
    if kind == "stacked":
        return load_stacked(model_dir, device=device, precision=precision)
    if kind == "cascade":
        return load_cascade(model_dir, device=device, precision=precision)
    return Predictor.load(model_dir, device=device, precision=precision)


def load_stacked(model_dir: str | Path, device: str = "auto", precision: str = "fp32") -> StackedPredictor:
    """Load a `kind: stacked` directory and its members (each through `load_predictor`)."""
    # imported here: loading a plain model (scoring, the MLflow pyfunc) never pulls in the ensemble code
    from simpair.ensemble.stacked import StackedPredictor
    from simpair.models.composite import StackSpec

    model_dir = Path(model_dir)
    meta = ModelMetadata.read(model_dir)
    spec = StackSpec.read(model_dir)
    members = []
    for rel in spec.members:
        path = model_dir / rel
        if not (path / METADATA_FILE).is_file():
            raise FileNotFoundError(f"{model_dir / 'stack.json'}: member {rel!r} is missing ({path})")
        members.append(load_predictor(path, device=device, precision=precision))
    return StackedPredictor(meta, spec, members, model_dir=model_dir)


def load_cascade(model_dir: str | Path, device: str = "auto", precision: str = "fp32") -> CascadePredictor:
    """Load a `kind: cascade` directory: its bi stage and cross-encoder (each through `load_predictor`)."""
    from simpair.ensemble.cascade import CascadePredictor
    from simpair.models.composite import CASCADE_FILE, CascadeSpec

    model_dir = Path(model_dir)
    meta = ModelMetadata.read(model_dir)
    spec = CascadeSpec.read(model_dir)
    members = []
    for rel in spec.members:
        path = model_dir / rel
        if not (path / METADATA_FILE).is_file():
            raise FileNotFoundError(f"{model_dir / CASCADE_FILE}: member {rel!r} is missing ({path})")
        members.append(load_predictor(path, device=device, precision=precision))
    return CascadePredictor(meta, spec, members, model_dir=model_dir)
