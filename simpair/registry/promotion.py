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
from datetime import UTC, datetime
from pathlib import Path

import mlflow
import polars as pl
import yaml

from simpair.catalog import Catalog
from simpair.evaluation.leaked_pairs import leaked_pair_ids
from simpair.models import ModelMetadata
from simpair.registry import registry, tracking
from simpair.registry.gate import GateDecision, GatePolicy, decide
from simpair.registry.gate_baseline import zero_shot_model
from simpair.registry.registry import CHALLENGER, CHAMPION, CorruptModel, ModelNotFound


@dataclass
class Evaluation:
    """Flat metrics (`<dataset>/<split>/<metric>`) of one model on the gate's common pair set."""

    metrics: dict[str, float]
    artifacts: list[Path] = field(default_factory=list)


def gate_exclusions(
    home: Path, eval_sets: Sequence[tuple[str, str]], trained_splits: Sequence[str] = ()
) -> dict[str, set[str]]:
    """Evaluation pair ids that also occur in *any* train-role split (ingest's leakage report), or in
    one of `trained_splits` ("dataset/split", e.g. a dev split a refit model trained on).

    The gate excludes the union for every model it compares, so challenger, champion and zero-shot
    are scored on exactly the same pairs even when they were trained on different splits.
    """
    catalog = Catalog(home)
    leakage = catalog.leakage()
    train_role = {
        f"{d}/{s}" for d in catalog.datasets() for s, role in catalog.splits(d).items() if role == "train"
    }
    counted = train_role | set(trained_splits)
    return {
        f"{dataset}/{split}": leaked_pair_ids(leakage, dataset, split, train_splits=counted)
        for dataset, split in eval_sets
    }


def evaluate(
    model_dir: Path,
    home: Path,
    eval_sets: Sequence[tuple[str, str]],
    excluded: Mapping[str, set[str]],
    out_dir: Path,
) -> Evaluation:
    """Score every pair with `evaluate_model` (plots, report), then compute the gate's metrics on the
    common set: all pairs of each split minus `excluded`, at the model's own dev-chosen threshold."""
    from simpair.evaluate import evaluate_model
    from simpair.evaluation.binary_classification import binary_metrics
    from simpair.evaluation.graded_similarity import graded_metrics

    result = evaluate_model(
        model_dir, home, datasets=[tuple(s) for s in eval_sets], exclude_leaked=False, out_dir=out_dir
    )
    threshold = float(ModelMetadata.read(model_dir).threshold)
    catalog = Catalog(home)
    metrics: dict[str, float] = {}
    for (dataset, split), pred_path in zip(eval_sets, result.predictions_paths, strict=True):
        label = f"{dataset}/{split}"
        gold = catalog.read_split(dataset, split).select(
            "pair_id", pl.col("label").alias("gold_label"), pl.col("score").alias("gold_score")
        )
        frame = pl.read_parquet(pred_path).join(gold, on="pair_id", how="inner")
        frame = frame.filter(~pl.col("pair_id").is_in(list(excluded.get(label, set()))))
        values: dict[str, float] = {"evaluated": float(frame.height)}
        if frame.height and frame["gold_label"].null_count() == 0:
            prob = frame["probability" if "probability" in frame.columns else "score"].to_numpy()
            values.update(binary_metrics(prob, frame["gold_label"].to_numpy(), threshold))
        elif frame.height and frame["gold_score"].null_count() == 0:
            values.update(graded_metrics(frame["score"].to_numpy(), frame["gold_score"].to_numpy()))
        metrics.update({f"{label}/{k}": float(v) for k, v in values.items()})
    artifacts = [result.report_path, *result.plot_paths]
    return Evaluation(metrics=metrics, artifacts=[Path(p) for p in artifacts if p])


def _log_gate_run(
    home: Path,
    name: str,
    decision: GateDecision,
    artifacts: Sequence[Path],
    eval_sets: Sequence[tuple[str, str]],
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
        catalog = Catalog(home)
        tracking.log_datasets(
            tracking.DatasetRef(ds, split, version, catalog.split_path(ds, split, version), "evaluation")
            for ds, split in eval_sets
            for version in [decision.dataset_versions[ds]]
        )
        return run.info.run_id


def _train_seed(model_dir: Path) -> int:
    """Seed the model was initialised with (tiny backbones: the zero-shot twin uses the same init)."""
    path = model_dir / "train_config.yaml"
    if path.is_file():
        seed = (yaml.safe_load(path.read_text()) or {}).get("seed")
        if isinstance(seed, int):
            return seed
    return 0


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
    challenger = registry.resolve_model(
        f"{name}/{version}", home, fresh=True
    )  # a corrupt challenger fails loudly
    excluded = gate_exclusions(home, eval_sets, ModelMetadata.read(challenger.local_dir).train_datasets)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = home / "gate" / name / f"v{version}-{stamp}"
    chal_eval = evaluate(challenger.local_dir, home, eval_sets, excluded, out / "challenger")

    champ_metrics: dict[str, float] | None = None
    champ_error: str | None = None
    artifacts = list(chal_eval.artifacts)
    if champion_version == version:
        champ_metrics = dict(chal_eval.metrics)  # re-gating the champion itself: never a promotion
    elif champion_version is not None:
        try:
            champion = registry.resolve_model(f"{name}/{champion_version}", home, fresh=True)
            champ_eval = evaluate(champion.local_dir, home, eval_sets, excluded, out / "champion")
            champ_metrics = champ_eval.metrics
            artifacts += champ_eval.artifacts
        except (CorruptModel, ModelNotFound, OSError, ValueError, RuntimeError) as exc:
            champ_error = f"{type(exc).__name__}: {exc}"

    zero_metrics: dict[str, float] | None = None
    if champ_metrics is None:
        meta = ModelMetadata.read(challenger.local_dir)
        backbone = policy.zero_shot_backbone or meta.backbone
        zs_dir = zero_shot_model(
            backbone,
            task,
            home,
            threshold_dataset=eval_sets[0][0] if eval_sets else None,
            seed=_train_seed(challenger.local_dir),
        )
        zero_eval = evaluate(zs_dir, home, eval_sets, excluded, out / "zero-shot")
        zero_metrics = zero_eval.metrics

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
    decision.excluded = {label: len(ids) for label, ids in excluded.items()}
    catalog = Catalog(home)
    decision.dataset_versions = {ds: catalog.current_version(ds) for ds, _ in eval_sets}

    gate_run_id = _log_gate_run(home, name, decision, artifacts, eval_sets, flow_tags)
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
    registry.tag_version(c, name, version, {"manual_promotion.reason": reason, "manual_promotion.by": by})
    return previous
