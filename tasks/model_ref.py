"""The Prefect task that pins a model reference, shared by every flow that runs a pinned model."""

from __future__ import annotations

from simpair.runtime.model_ref import resolve_model_ref
from simpair.tasks.stages import as_task

# pins the alias to one version, once per run (retried: the registry may be briefly unreachable)
resolve_model_task = as_task(resolve_model_ref)
