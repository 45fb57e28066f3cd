"""Run the promotion gate against the registry, and the manual moves (`promote --version`, rollback).

`run_gate` re-evaluates challenger and champion on the same evaluation splits at the dataset versions
current now, decides with `gate.decide`, and records the decision everywhere a person will look for it:
tags and description of the challenger version, a `gate-<task>` MLflow run with both metric sets and the
markdown report. Only then, and only on a "promote" decision, does it move `champion`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mlflow
from simpair.catalog import Catalog
from simpair.models import ModelMetadata
from simpair.registry import registry, tracking
from simpair.registry.gate import GateDecision, GatePolicy, decide, flatten_metrics
from simpair.registry.registry import CHALLENGER, CHAMPION, CorruptModel, ModelNotFound
from simpair.registry.zero_shot import zero_shot_model


@dataclass
class Evaluation:
    """Flat metrics of one model on the gate's splits, plus what evaluation excluded and wrote."""

    metrics: dict[str, float]
    excluded: dict[str, int] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)


def evaluate(model_dir: Path, home: Path, eval_sets: Sequence[tuple[str, str]]) -> Evaluation:
    """Evaluate one model directory on `eval_sets`, leaked pairs excluded (counted per split)."""
    from simpair.evaluation import evaluate_model

    result = evaluate_model(model_dir, home, datasets=[tuple(s) for s in eval_sets], exclude_leaked=True)
    excluded = {str(k): int(v) for k, v in dict(getattr(result, "excluded_counts", {}) or {}).items()}
    paths = [
        Path(p)
        for p in [getattr(result, "report_path", None), *(getattr(result, "plot_paths", []) or [])]
        if p
    ]
    return Evaluation(metrics=flatten_metrics(result.metrics), excluded=excluded, artifacts=paths)


def _log_gate_run(
    home: Path,
    name: str,
    decision: GateDecision,
    artifacts: Sequence[Path],
    flow_tags: Mapping[str, str] | None,
) -> str:
    experiment_id = tracking.ensure_experiment(home)
    tags = tracking.run_tags(
        flow_tags,
        {
            "simpair.stage": "gate",
            "simpair.model": name,
            "gate.decision": decision.outcome,
            "gate.challenger_version": decision.challenger_version,
            "gate.champion_version": decision.champion_version or "",
        },
    )
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=f"gate-{name}-v{decision.challenger_version}", tags=tags
    ) as run:
        for prefix, values in (
            ("challenger", decision.challenger),
            ("champion", decision.champion),
            ("zero_shot", decision.zero_shot),
        ):
            if values:
                mlflow.log_metrics({tracking._metric_key(f"{prefix}/{k}"): v for k, v in values.items()})
        mlflow.log_metric("promoted", 1.0 if decision.promote else 0.0)
        mlflow.log_text(decision.to_markdown(name), "gate_report.md")
        mlflow.log_dict(json.loads(json.dumps(decision.__dict__, default=str)), "gate_decision.json")
        tracking.log_artifacts(artifacts, artifact_path="evaluation")
        return run.info.run_id


def run_gate(
    home: Path,
    task: str,
    policy: GatePolicy,
    eval_sets: Sequence[tuple[str, str]],
    challenger_version: str | None = None,
    flow_tags: Mapping[str, str] | None = None,
) -> GateDecision:
    """Evaluate challenger vs champion (or the zero-shot bar), record the decision, move `champion` if won."""
    c = registry.client(home)
    name = registry.model_name(task)
    version = challenger_version or registry.version_for(c, name, CHALLENGER)
    if version is None:
        raise ModelNotFound(f"{name} has no challenger: train and register a model first")
    champion_version = registry.version_for(c, name, CHAMPION)
    challenger = registry.resolve_model(f"{name}/{version}", home)  # a corrupt challenger fails loudly
    chal_eval = evaluate(challenger.local_dir, home, eval_sets)

    champ_metrics: dict[str, float] | None = None
    champ_error: str | None = None
    artifacts = list(chal_eval.artifacts)
    if champion_version == version:
        champ_metrics = dict(chal_eval.metrics)  # re-gating the champion itself: never a promotion
    elif champion_version is not None:
        try:
            champion = registry.resolve_model(f"{name}/{champion_version}", home)
            champ_metrics = evaluate(champion.local_dir, home, eval_sets).metrics
        except (CorruptModel, ModelNotFound, OSError, ValueError, RuntimeError) as exc:
            champ_error = f"{type(exc).__name__}: {exc}"

    zero_metrics: dict[str, float] | None = None
    if champ_metrics is None:
        backbone = policy.zero_shot_backbone or ModelMetadata.read(challenger.local_dir).backbone
        zs_dir = zero_shot_model(
            backbone, task, home, threshold_dataset=eval_sets[0][0] if eval_sets else None
        )
        zero_metrics = evaluate(zs_dir, home, eval_sets).metrics

    decision = decide(
        policy,
        version,
        chal_eval.metrics,
        champion_version if champ_metrics or champ_error else None,
        champ_metrics,
        zero_metrics,
        champ_error,
    )
    if champion_version == version:
        decision.promote = False
        decision.reason = f"v{version} is already the champion; nothing to do"
    decision.excluded = chal_eval.excluded
    catalog = Catalog(home)
    decision.dataset_versions = {ds: catalog.current_version(ds) for ds, _ in eval_sets}

    gate_run_id = _log_gate_run(home, name, decision, artifacts, flow_tags)
    registry.tag_version(c, name, version, {**decision.tags(), "gate.run_id": gate_run_id})
    c.update_model_version(name, version, description=decision.to_markdown(name)[:5000])
    if decision.promote:
        registry.move_champion(c, name, version, reason=decision.reason, by="gate", action="promote")
    return decision


def promote_manual(home: Path, name: str, version: str, reason: str, by: str = "cli") -> str | None:
    """Operator override: make `version` champion without the gate, recording who and why."""
    if not reason.strip():
        raise ValueError("a manual promotion needs a --reason (it is written to the champion history)")
    c = registry.client(home)
    previous = registry.version_for(c, name, CHAMPION)
    registry.move_champion(c, name, version, reason=reason, by=by, action="promote")
    registry.tag_version(c, name, version, {"gate.decision": "manual", "gate.reason": reason})
    return previous
