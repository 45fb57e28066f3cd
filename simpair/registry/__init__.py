"""MLflow access only: tracking runs, registered versions, aliases (`challenger`/`champion`), tags, rollback.

Scoring only needs `resolve_model`; the decisions written here (the gate's, the precision verdict)
are made in `simpair.selection`. No Prefect import anywhere in this package: `tasks/registry.py`
wraps it.
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
