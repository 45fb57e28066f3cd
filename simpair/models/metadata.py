"""What a saved model directory says about itself (`simpair.json`).

Registry and scoring code never import training code: everything they need to turn texts into
scores (kind, task, threshold, max length, calibration) travels with the weights in one small JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

METADATA_FILE = "simpair.json"
FORMAT_VERSION = 1

Kind = Literal["cross", "bi", "stacked", "cascade"]
# Kinds made of member models (`members/` inside the directory), loaded by `simpair.runtime.loader`
COMPOSITE_KINDS = ("stacked", "cascade")
# the name a registered version gives its model folder among its MLflow pyfunc artifacts
MODEL_DIR_ARTIFACT = "model_dir"
Task = Literal["paraphrase", "sts"]


class ModelFile(BaseModel):
    """A JSON file that travels inside a model folder (`simpair.json`, `stack.json`, `cascade.json`),
    written and read one way: a missing file and an invalid one are refused naming the path."""

    FILE: ClassVar[str]
    MISSING: ClassVar[str]  # what a folder without the file is (the refusal's words)
    WHAT: ClassVar[str]  # what the file holds, for the refusal of an invalid one
    SORT_KEYS: ClassVar[bool] = False

    def json_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=self.SORT_KEYS)

    def write(self, model_dir: Path) -> Path:
        path = Path(model_dir) / self.FILE
        path.write_text(self.json_text() + "\n")
        return path

    @classmethod
    def read(cls, model_dir: Path) -> Self:
        path = Path(model_dir) / cls.FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: {cls.MISSING}")
        try:
            return cls.model_validate_json(path.read_text())
        except Exception as exc:  # pydantic names the field; add the file
            raise ValueError(f"{path}: invalid {cls.WHAT}: {exc}") from exc


class Calibration(BaseModel):
    """Maps a bi-encoder's cosine to a probability: p = sigmoid(a * cosine + b) (Platt scaling).

    Fitted on dev only (Platt, 1999, "Probabilistic outputs for support vector machines").
    """

    a: float
    b: float


class ModelMetadata(ModelFile):
    """Contents of `<model_dir>/simpair.json`. Unknown keys are kept so newer writers stay readable."""

    FILE = METADATA_FILE
    MISSING = f"not a simpair model directory (no {METADATA_FILE})"
    WHAT = "model metadata"
    SORT_KEYS = True
    model_config = ConfigDict(extra="allow")

    format_version: int = FORMAT_VERSION
    kind: Kind
    task: Task
    objective: str
    threshold: float = 0.5
    max_length: int = 128
    backbone: str
    symmetric: bool = False
    # Cross-encoders: "cls" (pooler + linear on [CLS]) or "segment_cosine" (simpair.models.cross_encoder)
    cross_head: Literal["cls", "segment_cosine"] = "cls"
    # Bi-encoders: how token vectors become one embedding; simpair trains "mean", an imported
    # sentence-transformers model may pool on "cls"
    pooling: Literal["mean", "cls"] = "mean"
    # False: `threshold` was never chosen (a model imported without a dev file), so paraphrase
    # predictions carry a probability and no label
    threshold_chosen: bool = True
    # A model brought from outside (simpair.models.foreign): where from, its content hash, when
    imported: dict[str, Any] | None = None
    calibration: Calibration | None = None
    dataset_versions: dict[str, str] = Field(default_factory=dict)
    train_datasets: list[str] = Field(default_factory=list)
    dev_pair_ids_file: str | None = None
    # Every (dataset, split, pair_id) the weights were trained on, parents included: evaluation uses it
    # to exclude leaked pairs exactly. One tab-separated line per pair.
    train_pairs_file: str | None = None
    init_from: str | None = None
    # Bi-encoders: how embeddings are post-processed before the cosine (embedding_postprocess.safetensors)
    embedding_postprocess: dict[str, Any] | None = None
    tokenizer_fingerprint: str | None = None
    created_at: str | None = None
