"""MLflow tracking, the model registry (aliases `challenger`/`champion`), the promotion gate, rollback.

Scoring only needs `resolve_model`; everything else is used by the nightly flow and the CLI. No Prefect
import anywhere in this package: `tasks/registry.py` wraps it.
"""

from simpair.registry.registry import (
    CHALLENGER,
    CHAMPION,
    MODEL_NAMES,
    CorruptModel,
    ModelNotFound,
    ResolvedModel,
    model_name,
    resolve_model,
)

__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "MODEL_NAMES",
    "CorruptModel",
    "ModelNotFound",
    "ResolvedModel",
    "model_name",
    "resolve_model",
]
