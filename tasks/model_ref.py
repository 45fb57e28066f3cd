"""The Prefect task that pins a model reference, shared by every flow that runs a pinned model."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from simpair.runtime.model_ref import ModelRef, resolve_model_ref


@task(name="resolve-model", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5)
def resolve_model_task(spec: str | None, home: Path) -> ModelRef:
    """Pin the alias to one version, once per run (retried: the registry may be briefly unreachable)."""
    return resolve_model_ref(spec, home)
