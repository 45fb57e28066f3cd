"""Nightly retraining, the parts that are not orchestration: profiles, the skip rule, the lock.

A profile (`configs/nightly.yaml`, `configs/nightly-smoke.yaml`) lists the tasks to train, the training
config of each, the evaluation splits and the gate policy. The skip rule compares the dataset versions
(content-addressed by ingest) and training-config hashes with those of the last *successful* night, so
a failed night is retried the next night even when nothing changed. The lock is a file lock in the
pipeline home: one nightly at a time per home, whatever started it (cron, `simpair nightly`, a Prefect
worker); a deployment adds `concurrency_limit=1` on top for multi-machine set-ups.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import yaml
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, model_validator

from simpair import settings
from simpair.registry.gate import GatePolicy

PROFILES = {"default": "configs/nightly.yaml", "smoke": "configs/nightly-smoke.yaml"}


class NightlyBusy(RuntimeError):
    """Another nightly run holds the lock of this pipeline home."""


class TaskPlan(BaseModel):
    """One registered model trained each night."""

    config: Path = Field(description="training config YAML, relative to the project root")
    evaluate: list[tuple[str, str]] = Field(description="(dataset, split) pairs the gate evaluates on")
    gate: GatePolicy
    jobs: int = Field(
        1,
        ge=1,
        description="stack configs: members trained at once, each in its own process with cores/jobs "
        "threads (CPU; on one GPU keep 1)",
    )

    def config_path(self) -> Path:
        return settings.shipped_path(self.config)


class Retries(BaseModel):
    """Retry policy for transient failures (I/O, tracking server unreachable); delays grow per attempt."""

    attempts: int = Field(3, ge=0)
    delays_seconds: list[float] = Field(default_factory=lambda: [10.0, 60.0, 300.0])


class NightlyProfile(BaseModel):
    """A nightly profile file, validated (errors name the file and the field)."""

    name: str
    tasks: dict[str, TaskPlan]
    retries: Retries = Field(default_factory=Retries)
    lock_wait_seconds: float = Field(0.0, ge=0.0, description="0: a second run exits at once with a message")
    expected_minutes: float | None = None

    @model_validator(mode="after")
    def _known_tasks(self) -> NightlyProfile:
        unknown = set(self.tasks) - {"paraphrase", "sts"}
        if unknown:
            raise ValueError(f"unknown task(s) {sorted(unknown)}; expected paraphrase and/or sts")
        return self

    @model_validator(mode="after")
    def _jobs_need_a_stack(self) -> NightlyProfile:
        """`jobs` > 1 on a single training config would be silently ignored: say so instead."""
        from simpair.ensemble import is_stack_config

        for name, plan in self.tasks.items():
            path = plan.config_path()
            if plan.jobs > 1 and path.is_file() and not is_stack_config(path):
                raise ValueError(
                    f"tasks.{name}.jobs is {plan.jobs}, but {plan.config} trains one model; jobs trains "
                    "the members of a stack config side by side (use 1, or point config at a stack)"
                )
        return self


def load_profile(profile: str | Path) -> NightlyProfile:
    """`default`, `smoke`, or a path to a profile YAML."""
    path = Path(PROFILES.get(str(profile), str(profile)))
    if not path.is_absolute() and not (str(profile) not in PROFILES and path.is_file()):
        path = settings.shipped_path(path)  # named profiles and project-relative paths
    if not path.is_file():
        raise FileNotFoundError(f"nightly profile {profile!r}: no file {path} (known: {sorted(PROFILES)})")
    try:
        return NightlyProfile.model_validate(yaml.safe_load(path.read_text()))
    except Exception as exc:
        raise ValueError(f"{path}: invalid nightly profile: {exc}") from exc


class NightState(BaseModel):
    """What the last successful night trained on, for the skip rule."""

    profile: str
    dataset_versions: dict[str, str]
    config_hashes: dict[str, str]
    finished_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    flow_run_id: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    decisions: dict[str, str] = Field(default_factory=dict)


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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)
    return path


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


def lock_path(home: Path) -> Path:
    return Path(home) / "nightly" / "nightly.lock"


@contextlib.contextmanager
def nightly_lock(home: Path, wait_seconds: float = 0.0) -> Iterator[Path]:
    """Hold the per-home nightly lock; NightlyBusy (naming the holder) if it stays taken `wait_seconds`."""
    path = lock_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = path.with_suffix(".holder")
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=wait_seconds)
    except Timeout as exc:
        who = holder.read_text().strip() if holder.exists() else "unknown process"
        raise NightlyBusy(
            f"another nightly run is in progress for {home} (held by {who}; lock {path}); "
            f"waited {wait_seconds:.0f}s. Exiting without doing anything."
        ) from exc
    try:
        since = datetime.now(UTC).isoformat(timespec="seconds")
        holder.write_text(f"pid {os.getpid()} on {socket.gethostname()} since {since}\n")
        yield path
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


class TaskOutcome(BaseModel):
    """What one task did tonight."""

    task: str
    model: str
    version: str | None = None
    decision: str | None = None  # promoted | rejected
    reason: str | None = None
    model_dir: str | None = None
    train_seconds: float | None = None


class NightlySummary(BaseModel):
    """The night in one object: printed by the CLI, published as a Prefect artifact, kept as JSON."""

    profile: str
    status: str  # "trained" | "skipped"
    message: str
    dataset_versions: dict[str, str] = Field(default_factory=dict)
    tasks: list[TaskOutcome] = Field(default_factory=list)
    seconds: float = 0.0
    flow_run_id: str | None = None

    def to_markdown(self) -> str:
        lines = [
            f"## Nightly retrain ({self.profile}): {self.status}",
            "",
            self.message,
            "",
            "Dataset versions: "
            + (", ".join(f"{k}={v}" for k, v in sorted(self.dataset_versions.items())) or "-"),
            "",
            f"Duration: {self.seconds:.0f} s"
            if self.seconds < 120
            else f"Duration: {self.seconds / 60:.1f} min",
        ]
        if self.tasks:
            lines += ["", "| task | model | version | gate | reason |", "|---|---|---|---|---|"]
            for t in self.tasks:
                reason = (t.reason or "").replace("|", "/")
                version, decision = t.version or "-", t.decision or "-"
                lines.append(f"| {t.task} | {t.model} | {version} | {decision} | {reason} |")
        return "\n".join(lines) + "\n"
