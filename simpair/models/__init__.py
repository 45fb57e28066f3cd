"""Similarity models: cross-encoders and bi-encoders, their saved format, and the single-model predictor.

`Predictor.load(dir)` loads one cross- or bi-encoder directory; `simpair.runtime.loader.load_predictor`
is the one door every stage (scoring, evaluation, the pyfunc) uses for every model kind, stacks included.
`save_tiny_model(path)` makes a random 2-layer model in the same format for fast tests.

The names below load on first use: importing a light submodule (`simpair.models.metadata`, which the
CLI reaches while it registers its commands) must not import torch and transformers, which cost
about 7 s of CPU here and made `simpair ingest` of 2M rows a third slower.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simpair.lazy import lazy_exports

if TYPE_CHECKING:
    from simpair.models.bi_encoder import BiEncoder, mean_pool
    from simpair.models.cross_encoder import CrossEncoder
    from simpair.models.io import build_model, load_model, save_model
    from simpair.models.metadata import METADATA_FILE, Calibration, ModelMetadata
    from simpair.models.predictor import Predictor
    from simpair.models.tiny import default_backbone, save_tiny_model

_EXPORTS = {
    "METADATA_FILE": "simpair.models.metadata",
    "BiEncoder": "simpair.models.bi_encoder",
    "Calibration": "simpair.models.metadata",
    "CrossEncoder": "simpair.models.cross_encoder",
    "ModelMetadata": "simpair.models.metadata",
    "Predictor": "simpair.models.predictor",
    "build_model": "simpair.models.io",
    "default_backbone": "simpair.models.tiny",
    "load_model": "simpair.models.io",
    "mean_pool": "simpair.models.bi_encoder",
    "save_model": "simpair.models.io",
    "save_tiny_model": "simpair.models.tiny",
}
__all__ = [
    "METADATA_FILE",
    "BiEncoder",
    "Calibration",
    "CrossEncoder",
    "ModelMetadata",
    "Predictor",
    "build_model",
    "default_backbone",
    "load_model",
    "mean_pool",
    "save_model",
    "save_tiny_model",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
