"""Similarity models: cross-encoders and bi-encoders, their saved format, and the single-model predictor.

`Predictor.load(dir)` loads one cross- or bi-encoder directory; `simpair.predictors.load_predictor(dir)`
is the door other stages (registry, scoring) use for every model kind, stacks included.
`save_tiny_model(path)` makes a random 2-layer model in the same format for fast tests.
"""

from simpair.models.bi_encoder import BiEncoder, mean_pool
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.io import build_model, load_model, save_model
from simpair.models.metadata import METADATA_FILE, Calibration, ModelMetadata
from simpair.models.predictor import Predictor
from simpair.models.tiny import default_backbone, save_tiny_model

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
