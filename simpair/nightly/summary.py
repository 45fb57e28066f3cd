"""What a night reports: each task's trained model, its gate outcome, the summary, the failure message.

The flow passes `Trained` from training to registration, collects a `TaskOutcome` per gate, and ends
with a `NightlySummary` (printed by the CLI, published as a Prefect artifact) and, after a trained
night, the `NightState` the skip rule reads next time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from simpair.nightly.plan import NightPlan, NightState
from simpair.registry import model_name


class NightlyFailed(RuntimeError):
    """The night failed; the message says where and that the registry was left as it was."""


def training_failed(profile: str, task: str, config: Path, exc: BaseException) -> NightlyFailed:
    """The error a night ends with when a task's training fails (nothing registered yet)."""
    return NightlyFailed(
        f"nightly ({profile}) failed while training {task!r} from {config}: "
        f"{type(exc).__name__}: {exc}. Nothing was registered; registry and aliases are unchanged."
    )


class Trained(BaseModel):
    """One task's trained and evaluated model, ready to register."""

    task: str
    model_dir: str
    config: dict[str, Any]
    metrics: dict[str, Any]
    history: list[dict[str, Any]]
    eval_metrics: dict[str, Any]
    eval_artifacts: list[str]
    seconds: float
    # where it trained, when elsewhere than the profile asked (`dispatch.fallback: cpu`)
    note: str | None = None

    @classmethod
    def of_model(
        cls,
        task: str,
        model_dir: Path,
        config: dict[str, Any],
        metrics: dict[str, Any],
        history: list[dict[str, Any]],
        evaluated: Any,
        seconds: float,
    ) -> Trained:
        """A single model: its training metrics (without the per-epoch history, kept apart)."""
        return cls(
            task=task,
            model_dir=str(model_dir),
            config=config,
            metrics={k: v for k, v in metrics.items() if k != "history"},
            history=history,
            eval_metrics=evaluated.metrics,
            eval_artifacts=[str(p) for p in [evaluated.report_path, *evaluated.plot_paths]],
            seconds=seconds,
        )

    @classmethod
    def of_stack(
        cls, task: str, model_dir: Path, config: dict[str, Any], evaluated: Any, seconds: float
    ) -> Trained:
        """A stack or soup: the dev metrics its combiner wrote (no training history of its own)."""
        metrics = json.loads((Path(model_dir) / "metrics.json").read_text())
        return cls(
            task=task,
            model_dir=str(model_dir),
            config=config,
            metrics={k: v for k, v in metrics.items() if k in ("dev", "dev_pairs", "dev_source")},
            history=[],
            eval_metrics=evaluated.metrics,
            eval_artifacts=[str(p) for p in [evaluated.report_path, *evaluated.plot_paths]],
            seconds=seconds,
        )


class TaskOutcome(BaseModel):
    """What one task did tonight."""

    task: str
    model: str
    version: str | None = None
    decision: str | None = None  # promoted | rejected
    reason: str | None = None
    model_dir: str | None = None
    train_seconds: float | None = None

    @classmethod
    def of(
        cls, trained: Trained, version: str | None, decision: str | None, reason: str | None
    ) -> TaskOutcome:
        """A task's registered version of `trained` and the gate's decision on it."""
        return cls(
            task=trained.task,
            model=model_name(trained.task),
            version=version,
            decision=decision,
            reason=reason,
            model_dir=trained.model_dir,
            train_seconds=trained.seconds,
        )


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


def skipped_summary(profile: str, night: NightPlan, seconds: float, flow_run_id: str) -> NightlySummary:
    """The summary of a night that found nothing changed."""
    return NightlySummary(
        profile=profile,
        status="skipped",
        message=night.skip or "",
        dataset_versions=night.dataset_versions,
        seconds=seconds,
        flow_run_id=flow_run_id,
    )


def trained_summary(
    profile: str, night: NightPlan, outcomes: list[TaskOutcome], seconds: float, flow_run_id: str
) -> NightlySummary:
    """The summary of a night that trained, registered and gated every task."""
    return NightlySummary(
        profile=profile,
        status="trained",
        message=f"trained {len(outcomes)} model(s); "
        + "; ".join(f"{o.model} v{o.version} {o.decision}" for o in outcomes),
        dataset_versions=night.dataset_versions,
        tasks=outcomes,
        seconds=seconds,
        flow_run_id=flow_run_id,
    )


def success_state(
    profile: str, night: NightPlan, outcomes: list[TaskOutcome], flow_run_id: str
) -> NightState:
    """What the skip rule compares with next time, written at the end of a successful night."""
    return NightState(
        profile=profile,
        dataset_versions=night.dataset_versions,
        config_hashes=night.config_hashes,
        flow_run_id=flow_run_id,
        versions={o.task: o.version or "" for o in outcomes},
        decisions={o.task: o.decision or "" for o in outcomes},
    )
