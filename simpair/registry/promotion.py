"""Run the promotion gate against the registry, and the manual moves (`promote --version`, rollback).

`run_gate` re-evaluates challenger and champion on the same evaluation splits at the dataset versions
current now, decides with `gate.decide`, and records the decision everywhere a person will look for it:
tags and description of the challenger version, a `gate-<task>` MLflow run with both metric sets and the
markdown report. Only then, and only on a "promote" decision, does it move `champion`.

Canary splits (the policy's off-domain checks) are scored for the challenger and, always, for the
untrained backbone, on the same pairs: the gate's exclusion union plus any canary pair the challenger
trained on.

A cascade challenger is evaluated as a whole like any model, and also against its own cross-encoder
alone on the same common pairs (`cascade_checks`): the share of pairs its cross-encoder scored and the
share of decisions that differ, which must stay within its limit.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlflow
import polars as pl
import yaml

from simpair.catalog import Catalog
from simpair.evaluation.leaked_pairs import leaked_pair_ids, trained_pairs
from simpair.models import ModelMetadata
from simpair.models.precision_verdict import report_line
from simpair.registry import registry, tracking
from simpair.registry.gate import (
    THRESHOLD_FREE_BINARY,
    CanaryResult,
    CascadeCheck,
    GateDecision,
    GatePolicy,
    decide,
)
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
    from simpair.evaluation.binary_classification import binary_metrics
    from simpair.evaluation.graded_similarity import graded_metrics
    from simpair.evaluation.splits import evaluate_model

    result = evaluate_model(
        model_dir, home, datasets=[tuple(s) for s in eval_sets], exclude_leaked=False, out_dir=out_dir
    )
    meta = ModelMetadata.read(model_dir)
    threshold = float(meta.threshold)
    # An uncalibrated bi-encoder (the zero-shot backbone) scores clip(cosine, 0, 1): negative cosines
    # tie at 0. Rank figures (ROC-AUC, Spearman) are read on the raw cosine, whose order is the model's.
    clipped = meta.kind == "bi" and meta.calibration is None
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
        raw = frame["raw"].to_numpy()
        if frame.height and frame["gold_label"].null_count() == 0:
            prob = frame["probability" if "probability" in frame.columns else "score"].to_numpy()
            binary = binary_metrics(prob, frame["gold_label"].to_numpy(), threshold)
            if meta.task != "paraphrase":  # a graded model's 0.5 was never tuned: threshold-free only
                binary = {k: v for k, v in binary.items() if k in THRESHOLD_FREE_BINARY}
            if clipped:
                binary["roc_auc"] = binary_metrics(raw, frame["gold_label"].to_numpy(), threshold)["roc_auc"]
            values.update(binary)
        elif frame.height and frame["gold_score"].null_count() == 0:
            graded = graded_metrics(frame["score"].to_numpy(), frame["gold_score"].to_numpy())
            if clipped:
                graded["spearman"] = graded_metrics(raw, frame["gold_score"].to_numpy())["spearman"]
            values.update(graded)
        metrics.update({f"{label}/{k}": float(v) for k, v in values.items()})
    artifacts = [result.report_path, *result.plot_paths]
    return Evaluation(metrics=metrics, artifacts=[Path(p) for p in artifacts if p])


def cascade_checks(
    model_dir: Path,
    home: Path,
    eval_sets: Sequence[tuple[str, str]],
    excluded: Mapping[str, set[str]],
    limit: float | None = None,
) -> list[CascadeCheck]:
    """A cascade against its own cross-encoder alone on each split's common pairs ([] for other kinds).

    The band was fitted on dev to keep at most `max_disagreement` of decisions different from the
    cross-encoder's; these pairs are ones it never saw, so a band fitted too narrow shows here. `limit`
    (the policy's `cascade_max_disagreement`) replaces the cascade's own when given.
    """
    if ModelMetadata.read(model_dir).kind != "cascade":
        return []
    from simpair.ensemble.cascade import compare_with_cross
    from simpair.predictors import load_predictor

    predictor = load_predictor(model_dir)
    bound = predictor.spec.max_disagreement if limit is None else limit
    catalog = Catalog(home)
    checks: list[CascadeCheck] = []
    for dataset, split in eval_sets:
        label = f"{dataset}/{split}"
        frame = catalog.read_split(dataset, split)
        frame = frame.filter(~pl.col("pair_id").is_in(list(excluded.get(label, set()))))
        if frame.height == 0:
            continue
        agreement = compare_with_cross(predictor, frame["text_a"].to_list(), frame["text_b"].to_list())
        checks.append(
            CascadeCheck(label, agreement.pairs, agreement.share_to_cross, agreement.disagreement, bound)
        )
    return checks


def _log_gate_run(
    home: Path,
    name: str,
    decision: GateDecision,
    artifacts: Sequence[Path],
    eval_sets: Sequence[tuple[str, str]],
    flow_tags: Mapping[str, str] | None,
    canary_sets: Sequence[tuple[str, str]] = (),
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
        for canary in decision.canaries:
            key = f"canary/{canary.label}/{canary.metric}"
            mlflow.log_metrics(
                {
                    tracking._metric_key(f"{key}/challenger"): canary.challenger,
                    tracking._metric_key(f"{key}/zero_shot"): canary.zero_shot,
                    tracking._metric_key(f"{key}/passed"): 1.0 if canary.passed else 0.0,
                }
            )
        for check in decision.cascade:
            key = f"cascade/{check.label}"
            mlflow.log_metrics(
                {
                    tracking._metric_key(f"{key}/{name}"): float(value)
                    for name, value in (
                        ("pairs", check.pairs),
                        ("share_to_cross", check.share_to_cross),
                        ("disagreement", check.disagreement),
                        ("limit", check.limit),
                        ("passed", 1.0 if check.passed else 0.0),
                    )
                }
            )
        mlflow.log_metric("promoted", 1.0 if decision.promote else 0.0)
        if decision.wise_ft:
            _log_wise_ft(decision.wise_ft)
        mlflow.log_text(decision.to_markdown(name), "gate_report.md")
        decision_json = json.dumps(dataclasses.asdict(decision), default=str)
        mlflow.log_dict(json.loads(decision_json), "gate_decision.json")
        tracking.log_artifacts(artifacts, artifact_path="evaluation")
        catalog = Catalog(home)
        tracking.log_datasets(
            tracking.DatasetRef(ds, split, version, catalog.split_path(ds, split, version), "evaluation")
            for ds, split in eval_sets
            for version in [decision.dataset_versions[ds]]
        )
        tracking.log_datasets(
            tracking.DatasetRef(ds, split, version, catalog.split_path(ds, split, version), "canary")
            for ds, split in canary_sets
            if (ds, split) not in eval_sets
            for version in [decision.dataset_versions[ds]]
        )
        return run.info.run_id


def _log_wise_ft(record: Mapping[str, Any]) -> None:
    """The WiSE-FT choice on the gate run: its policy as params, each alpha's figures as metrics."""
    policy = record.get("policy", {})
    mlflow.log_params(
        {
            "wise_ft.alpha": f"{record['alpha']:g}",
            "wise_ft.alphas": ",".join(f"{a:g}" for a in policy.get("alphas", [])),
            "wise_ft.canary_margin": policy.get("canary_margin"),
            "wise_ft.dev_tolerance": policy.get("dev_tolerance"),
            "wise_ft.canaries": ",".join(record["backbone"]),
        }
    )
    figures = {f"wise_ft/alpha_{a}/{k}": v for a, row in record["by_alpha"].items() for k, v in row.items()}
    figures |= {f"wise_ft/backbone/{k}": v for k, v in record["backbone"].items()}
    mlflow.log_metrics({tracking._metric_key(k): float(v) for k, v in figures.items()})
    mlflow.log_dict(dict(record), "wise_ft.json")


def wise_ft_record(model_dir: Path) -> dict[str, Any] | None:
    """The WiSE-FT path a model was chosen from (its metrics.json `wise_ft`), None for a plain model.

    A cascade's band is fitted on its cross-encoder as chosen, so the cross-encoder's path is the one.
    """
    model_dir = Path(model_dir)
    path = model_dir / "metrics.json"
    record = json.loads(path.read_text()).get("wise_ft") if path.is_file() else None
    if record is None and (model_dir / "cascade.json").is_file():
        from simpair.ensemble.cascade import CROSS, CascadeSpec

        return wise_ft_record(model_dir / CascadeSpec.read(model_dir).members[CROSS])
    return record if isinstance(record, dict) and "by_alpha" in record else None


def _train_seed(model_dir: Path) -> int:
    """Seed the model was initialised with (tiny backbones: the zero-shot twin uses the same init)."""
    path = model_dir / "train_config.yaml"
    if path.is_file():
        seed = (yaml.safe_load(path.read_text()) or {}).get("seed")
        if isinstance(seed, int):
            return seed
    return 0


def canary_exclusions(
    home: Path, canary_sets: Sequence[tuple[str, str]], challenger_dir: Path
) -> dict[str, set[str]]:
    """The gate's exclusion union on each canary split, plus the canary pairs the challenger trained on.

    A canary is a split the challenger should not have seen; where it did see some of its pairs (a
    canary drawn from a split it refit on), those pairs would measure memory, not transfer.
    """
    meta = ModelMetadata.read(challenger_dir)
    excluded = gate_exclusions(home, canary_sets, meta.train_datasets)
    exact, splits = trained_pairs(challenger_dir, meta)
    catalog = Catalog(home)
    for dataset, split in canary_sets:
        label = f"{dataset}/{split}"
        if exact is not None:
            mine = exact.filter((pl.col("dataset") == dataset) & (pl.col("split") == split)).collect()
            excluded[label] |= set(mine["pair_id"].to_list())
        elif label in splits:  # no pair list: every pair of a split it trained on is suspect
            excluded[label] |= set(catalog.read_split(dataset, split)["pair_id"].to_list())
    return excluded


def _is_binary(home: Path, dataset: str, split: str) -> bool:
    """Whether a split carries 0/1 labels (else graded scores): picks the canary's default metric."""
    labels = Catalog(home).read_split(dataset, split)["label"]
    return len(labels) > 0 and labels.null_count() == 0


def _split_metrics(metrics: Mapping[str, float], sets: Sequence[tuple[str, str]]) -> dict[str, float]:
    prefixes = tuple(f"{dataset}/{split}/" for dataset, split in sets)
    return {k: v for k, v in metrics.items() if k.startswith(prefixes)}


def _canary_value(metrics: Mapping[str, float], label: str, name: str, who: str) -> float:
    key = f"{label}/{name}"
    if key not in metrics:
        shown = sorted(k.removeprefix(f"{label}/") for k in metrics if k.startswith(f"{label}/"))
        raise ValueError(f"canary {label}: no {name!r} for the {who} (computed: {shown})")
    return float(metrics[key])


def run_gate(
    home: Path,
    task: str,
    policy: GatePolicy,
    eval_sets: Sequence[tuple[str, str]],
    challenger_version: str | None = None,
    flow_tags: Mapping[str, str] | None = None,
) -> GateDecision:
    """Evaluate challenger vs champion (or the zero-shot bar), record the decision, move `champion` if won.

    With canaries in the policy, challenger and untrained backbone are also compared on each canary
    split, and a canary failure rejects the challenger whatever the in-domain outcome. A cascade
    challenger whose decisions on the evaluation pairs differ from its own cross-encoder's beyond its
    limit is rejected the same way.
    """
    c = registry.client(home)
    name = registry.model_name(task)
    version = challenger_version or registry.version_for(c, name, CHALLENGER)
    if version is None:
        raise ModelNotFound(f"{name} has no challenger: train and register a model first")
    champion_version = registry.version_for(c, name, CHAMPION)
    challenger = registry.resolve_model(
        f"{name}/{version}", home, fresh=True
    )  # a corrupt challenger fails loudly
    eval_sets = [(dataset, split) for dataset, split in eval_sets]  # YAML lists compare as tuples
    canary_sets = [(cn.dataset, cn.split) for cn in policy.canaries]
    canary_metrics = [  # resolved before any evaluation: a bad canary fails in seconds, not after scoring
        cn.resolve_metric(task, policy.primary, _is_binary(home, cn.dataset, cn.split))
        for cn in policy.canaries
    ]
    excluded = gate_exclusions(home, eval_sets, ModelMetadata.read(challenger.local_dir).train_datasets)
    excluded.update(canary_exclusions(home, canary_sets, challenger.local_dir))
    scored_sets = list(dict.fromkeys([*eval_sets, *canary_sets]))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = home / "gate" / name / f"v{version}-{stamp}"
    chal_eval = evaluate(challenger.local_dir, home, scored_sets, excluded, out / "challenger")
    chal_metrics = _split_metrics(chal_eval.metrics, eval_sets)
    cascade = cascade_checks(challenger.local_dir, home, eval_sets, excluded, policy.cascade_max_disagreement)

    champ_metrics: dict[str, float] | None = None
    champ_error: str | None = None
    artifacts = list(chal_eval.artifacts)
    if champion_version == version:
        champ_metrics = dict(chal_metrics)  # re-gating the champion itself: never a promotion
    elif champion_version is not None:
        try:
            champion = registry.resolve_model(f"{name}/{champion_version}", home, fresh=True)
            champ_eval = evaluate(champion.local_dir, home, eval_sets, excluded, out / "champion")
            champ_metrics = champ_eval.metrics
            artifacts += champ_eval.artifacts
        except (CorruptModel, ModelNotFound, OSError, ValueError, RuntimeError) as exc:
            champ_error = f"{type(exc).__name__}: {exc}"

    zero_metrics: dict[str, float] | None = None
    canaries: list[CanaryResult] = []
    zero_sets = list(dict.fromkeys([*(eval_sets if champ_metrics is None else []), *canary_sets]))
    if zero_sets:
        meta = ModelMetadata.read(challenger.local_dir)
        backbone = policy.zero_shot_backbone or meta.backbone
        zs_dir = zero_shot_model(
            backbone,
            task,
            home,
            threshold_dataset=eval_sets[0][0] if eval_sets else None,
            seed=_train_seed(challenger.local_dir),
        )
        zero_eval = evaluate(zs_dir, home, zero_sets, excluded, out / "zero-shot")
        if champ_metrics is None:
            zero_metrics = _split_metrics(zero_eval.metrics, eval_sets)
        for cn, metric_name in zip(policy.canaries, canary_metrics, strict=True):
            canaries.append(
                CanaryResult(
                    label=cn.label,
                    metric=metric_name,
                    challenger=_canary_value(chal_eval.metrics, cn.label, metric_name, "challenger"),
                    zero_shot=_canary_value(zero_eval.metrics, cn.label, metric_name, "zero-shot backbone"),
                    margin=cn.margin,
                )
            )

    decision = decide(
        policy,
        version,
        chal_metrics,
        champion_version if champ_metrics or champ_error else None,
        champ_metrics,
        zero_metrics,
        champ_error,
        canaries,
        cascade,
    )
    if champion_version == version:
        decision.promote = False
        decision.reason = f"v{version} is already the champion; nothing to do"
    decision.wise_ft = wise_ft_record(challenger.local_dir)
    decision.precision = report_line(c.get_model_version(name, version).tags, challenger.local_dir)
    decision.excluded = {label: len(ids) for label, ids in excluded.items()}
    catalog = Catalog(home)
    decision.dataset_versions = {ds: catalog.current_version(ds) for ds, _ in scored_sets}

    gate_run_id = _log_gate_run(home, name, decision, artifacts, eval_sets, flow_tags, canary_sets)
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
