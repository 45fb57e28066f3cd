"""Tonight's plan and the skip rule: train only when a source or a training config changed.

The skip rule compares the dataset versions (content-addressed by ingest) and training-config hashes
with those of the last *successful* night, so a failed night is retried the next night even when
nothing changed. Every dataset of the catalog counts, the `reviews` datasets that `simpair review
import` versions included: new reviews are new data, so the night retrains on them. The state of
that night is written only at the end of a successful night.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from simpair.atomic import atomic_write_text
from simpair.catalog import Catalog
from simpair.ensemble.config import StackConfig, is_stack_config
from simpair.nightly.profile import NightlyProfile
from simpair.registry.tracking import config_hash
from simpair.stages import step
from simpair.training.config import TrainConfig


class NightState(BaseModel):
    """What the last successful night trained on, for the skip rule."""

    profile: str
    dataset_versions: dict[str, str]
    config_hashes: dict[str, str]
    finished_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    flow_run_id: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    decisions: dict[str, str] = Field(default_factory=dict)


class NightPlan(BaseModel):
    """What tonight will do, decided after ingest."""

    dataset_versions: dict[str, str]
    config_hashes: dict[str, str]
    skip: str | None = None


def state_path(home: Path, profile: str) -> Path:
    return Path(home) / "nightly" / f"last-success-{profile}.json"


def read_state(home: Path, profile: str) -> NightState | None:
    path = state_path(home, profile)
    if not path.is_file():
        return None
    return NightState.model_validate_json(path.read_text())


def write_state(home: Path, state: NightState) -> Path:
    """Atomic write (temp + rename): a crash never leaves a half state that would skip a night."""
    path = state_path(home, state.profile)
    return atomic_write_text(path, state.model_dump_json(indent=2) + "\n")


def skip_reason(
    previous: NightState | None, dataset_versions: dict[str, str], config_hashes: dict[str, str]
) -> str | None:
    """Why training can be skipped tonight, or None when it must run."""
    if previous is None:
        return None
    if previous.dataset_versions != dataset_versions or previous.config_hashes != config_hashes:
        return None
    shown = ", ".join(f"{k}={v}" for k, v in sorted(dataset_versions.items()))
    return (
        f"no source or training config changed since the last successful night ({previous.finished_at}; "
        f"{shown}); skipping training (use --force to retrain)"
    )


def config_dump(path: Path) -> dict[str, Any]:
    """The whole config a task trains from: a training config, or a stack config and its members'."""
    if is_stack_config(path):
        return StackConfig.from_yaml(path).full_dump()
    return TrainConfig.from_yaml(path).model_dump(mode="json")


@step("plan-night")
def plan_night(profile: NightlyProfile, home: Path, force: bool) -> NightPlan:
    """Dataset versions after ingest, training-config hashes, and whether tonight can be skipped."""
    catalog = Catalog(home)
    versions = {dataset: catalog.current_version(dataset) for dataset in catalog.datasets()}
    hashes = {  # a changed WiSE-FT policy or reviews block changes the registered model: a config change
        name: config_hash(
            config_dump(plan.config_path())
            | ({"wise_ft": plan.wise_ft.model_dump()} if plan.wise_ft else {})
            | ({"reviews": plan.reviews.model_dump()} if plan.reviews else {})
        )
        for name, plan in profile.tasks.items()
    }
    reason = None if force else skip_reason(read_state(home, profile.name), versions, hashes)
    return NightPlan(dataset_versions=versions, config_hashes=hashes, skip=reason)
