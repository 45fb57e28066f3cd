"""What a night reports: each task's trained model, its gate outcome, the summary, the failure message.

The flow passes `Trained` from training to registration, collects a `TaskOutcome` per gate, and ends
with a `NightlySummary` (printed by the CLI, published as a Prefect artifact, the first part of the
night's report in `simpair.nightly.report`) and, after a trained night, the `NightState` the skip rule
reads next time. The summary keeps what the report needs and the flow would otherwise drop: the ingest
counts (`IngestedSplit`), each gate's report with its canaries and precision verdict, and a place for
the accuracy measured on reviewed traffic (`TrafficAccuracy`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from simpair.ingest.report import IngestReport
from simpair.nightly.plan import NightPlan, NightState
from simpair.registry import model_name
from simpair.selection.gate import GateDecision


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


class TrafficAccuracy(BaseModel):
    """A model's accuracy on the team's own reviewed traffic: `metric` at `value`, with its interval
    [`low`, `high`] (a bootstrap over the `n_reviewed` pairs behind it). Set on a `TaskOutcome` by
    whoever measured it (the gate, on a `traffic` evaluation split); the night's report shows it under
    "Accuracy on your traffic"."""

    metric: str
    value: float
    low: float | None = None
    high: float | None = None
    n_reviewed: int
    model: str | None = None  # `name vN`, when not the task's challenger (e.g. its champion)
    split: str = "traffic"


class IngestedSplit(BaseModel):
    """What ingest did to one split of one source tonight (the report's first table)."""

    dataset: str
    status: str  # ingested | unchanged | failed
    version: str | None = None
    split: str | None = None  # None: the source as a whole (unchanged, or failed before its splits)
    clean: int = 0
    quarantined: int = 0
    reasons: dict[str, int] = Field(default_factory=dict)
    error: str | None = None


def ingested_splits(report: IngestReport | None) -> list[IngestedSplit]:
    """One row per split of every ingested source, one per unchanged or failed source."""
    rows: list[IngestedSplit] = []
    for d in report.datasets if report is not None else []:
        base = {"dataset": d.dataset, "status": d.status, "version": d.version, "error": d.error}
        if d.status != "ingested" or not d.splits:
            rows.append(IngestedSplit(**base))
            continue
        for s in d.splits:
            rows.append(
                IngestedSplit(
                    **base, split=s.split, clean=s.clean, quarantined=s.quarantined, reasons=s.reasons
                )
            )
        if d.unassigned:  # records no split could take: quarantined with the source
            rows.append(
                IngestedSplit(
                    **base, split="(no split)", quarantined=d.unassigned, reasons=d.unassigned_reasons
                )
            )
    return rows


class TaskOutcome(BaseModel):
    """What one task did tonight."""

    task: str
    model: str
    version: str | None = None
    decision: str | None = None  # promoted | rejected
    reason: str | None = None
    model_dir: str | None = None
    train_seconds: float | None = None
    # the gate's own report (metrics against the champion, canaries, precision), as the registry keeps it
    gate_report: str | None = None
    precision: str | None = None  # the rung `--precision auto` scores the challenger in, and why
    canaries_failed: int = 0
    canaries: int = 0
    # accuracy on reviewed traffic, when the gate measured it (the report's "Accuracy on your traffic")
    traffic: list[TrafficAccuracy] = Field(default_factory=list)

    @classmethod
    def of(
        cls,
        trained: Trained,
        version: str | None,
        decision: str | None,
        reason: str | None,
        gate: GateDecision | None = None,
    ) -> TaskOutcome:
        """A task's registered version of `trained` and the gate's decision on it (with the whole
        `gate` decision, its report, canaries and precision verdict are kept for the night's report)."""
        return cls(
            task=trained.task,
            model=model_name(trained.task),
            version=version,
            decision=decision,
            reason=reason,
            model_dir=trained.model_dir,
            train_seconds=trained.seconds,
            gate_report=gate.to_markdown(model_name(trained.task)) if gate is not None else None,
            precision=gate.precision if gate is not None else None,
            canaries=len(gate.canaries) if gate is not None else 0,
            canaries_failed=sum(not c.passed for c in gate.canaries) if gate is not None else 0,
            traffic=traffic_accuracy(gate, f"{model_name(trained.task)} v{version}"),
        )


def traffic_accuracy(gate: GateDecision | None, challenger: str) -> list[TrafficAccuracy]:
    """The gate's traffic check (`gate.TrafficCheck`) as the report's rows: the challenger with its 95%
    interval, then its reference (champion or zero-shot) on the same reviewed pairs."""
    t = gate.traffic if gate is not None else None
    if t is None:
        return []
    split = t.label.rsplit("/", 1)[-1]
    finite = math.isfinite(t.challenger_low) and math.isfinite(t.challenger_high)
    return [
        TrafficAccuracy(
            metric=t.metric, value=t.challenger, low=t.challenger_low if finite else None,
            high=t.challenger_high if finite else None, n_reviewed=t.pairs, model=challenger, split=split,
        ),
        TrafficAccuracy(
            metric=t.metric, value=t.reference, n_reviewed=t.pairs, model=t.reference_name, split=split
        ),
    ]  # fmt: skip


class NightlySummary(BaseModel):
    """The night in one object: printed by the CLI, published as a Prefect artifact, kept as JSON."""

    profile: str
    status: str  # "trained" | "skipped"
    message: str
    dataset_versions: dict[str, str] = Field(default_factory=dict)
    tasks: list[TaskOutcome] = Field(default_factory=list)
    seconds: float = 0.0
    flow_run_id: str | None = None
    ingest: list[IngestedSplit] = Field(default_factory=list)

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


def skipped_summary(
    profile: str,
    night: NightPlan,
    seconds: float,
    flow_run_id: str,
    ingest: IngestReport | None = None,
) -> NightlySummary:
    """The summary of a night that found nothing changed."""
    return NightlySummary(
        profile=profile,
        status="skipped",
        message=night.skip or "",
        dataset_versions=night.dataset_versions,
        seconds=seconds,
        flow_run_id=flow_run_id,
        ingest=ingested_splits(ingest),
    )


def trained_summary(
    profile: str,
    night: NightPlan,
    outcomes: list[TaskOutcome],
    seconds: float,
    flow_run_id: str,
    ingest: IngestReport | None = None,
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
        ingest=ingested_splits(ingest),
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
