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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlflow
import polars as pl
from mlflow import MlflowClient

from simpair.catalog import Catalog
from simpair.evaluation.common_set import Evaluation, canary_exclusions, evaluate, gate_exclusions
from simpair.evaluation.traffic import split_is_binary, traffic_figures
from simpair.evaluation.zero_shot_baseline import zero_shot_model
from simpair.models import ModelMetadata
from simpair.models.precision_verdict import report_line
from simpair.registry import registry, tracking
from simpair.registry.registry import CHALLENGER, CHAMPION, CorruptModel, ModelNotFound
from simpair.selection.gate import (
    CanaryResult,
    CascadeCheck,
    GateDecision,
    GatePolicy,
    TrafficCheck,
    decide,
    resolve_traffic_metric,
)
from simpair.stages import step
from simpair.training.config import train_seed


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
    from simpair.ensemble.cascade_band import compare_with_cross
    from simpair.runtime.loader import load_predictor

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
        if decision.traffic:
            t = decision.traffic
            mlflow.log_metrics(
                {
                    tracking._metric_key(f"traffic/{t.label}/{t.metric}/{key}"): float(value)
                    for key, value in (
                        ("pairs", t.pairs),
                        ("challenger", t.challenger),
                        ("challenger_low", t.challenger_low),
                        ("challenger_high", t.challenger_high),
                        ("reference", t.reference),
                        ("delta_low", t.delta_low),
                        ("delta_high", t.delta_high),
                        ("passed", 1.0 if t.passed else 0.0),
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
        if decision.traffic:
            ds, split = decision.traffic.label.split("/", 1)
            version = decision.dataset_versions[ds]
            tracking.log_datasets(
                [tracking.DatasetRef(ds, split, version, catalog.split_path(ds, split, version), "traffic")]
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
        from simpair.models.composite import CascadeSpec
        from simpair.runtime.cascade import CROSS

        return wise_ft_record(model_dir / CascadeSpec.read(model_dir).members[CROSS])
    return record if isinstance(record, dict) and "by_alpha" in record else None


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


def _score_champion(
    home: Path,
    name: str,
    version: str,
    champion_version: str | None,
    challenger: Evaluation,
    eval_sets: Sequence[tuple[str, str]],
    traffic_sets: Sequence[tuple[str, str]],
    excluded: Mapping[str, set[str]],
    out: Path,
) -> tuple[Evaluation | None, str | None]:
    """The champion's evaluation on the same pairs (its metrics limited to `eval_sets`; the traffic
    split scored too, for the traffic check), or why it could not be scored.

    No champion: (None, None). A champion that fails to load or score is recorded as an error
    (the gate then compares with the zero-shot bar) rather than blocking every future challenger.
    """
    if champion_version == version:  # re-gating the champion itself: never a promotion
        return dataclasses.replace(challenger, metrics=_split_metrics(challenger.metrics, eval_sets)), None
    if champion_version is None:
        return None, None
    try:
        champion = registry.resolve_model(f"{name}/{champion_version}", home, fresh=True)
        sets = list(dict.fromkeys([*eval_sets, *traffic_sets]))
        champ_eval = evaluate(champion.local_dir, home, sets, excluded, out / "champion")
    except (CorruptModel, ModelNotFound, OSError, ValueError, RuntimeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return dataclasses.replace(champ_eval, metrics=_split_metrics(champ_eval.metrics, eval_sets)), None


def _score_zero_shot_and_canaries(
    home: Path,
    task: str,
    policy: GatePolicy,
    challenger_dir: Path,
    challenger_metrics: Mapping[str, float],
    zero_sets: Sequence[tuple[str, str]],
    eval_sets: Sequence[tuple[str, str]],
    canary_metrics: Sequence[str],
    excluded: Mapping[str, set[str]],
    out: Path,
) -> tuple[dict[str, float], list[CanaryResult], Evaluation]:
    """Score the untrained backbone on `zero_sets`; return its in-domain metrics, the canary results
    and its whole evaluation (the traffic check reads its scored traffic pairs).

    `challenger_metrics` are the challenger's flat metrics on every scored set, canaries included.
    """
    meta = ModelMetadata.read(challenger_dir)
    backbone = policy.zero_shot_backbone or meta.backbone
    zs_dir = zero_shot_model(
        backbone,
        task,
        home,
        threshold_dataset=eval_sets[0][0] if eval_sets else None,
        seed=train_seed(challenger_dir),
    )
    zero_eval = evaluate(zs_dir, home, zero_sets, excluded, out / "zero-shot")
    canaries = [
        CanaryResult(
            label=cn.label,
            metric=metric_name,
            challenger=_canary_value(challenger_metrics, cn.label, metric_name, "challenger"),
            zero_shot=_canary_value(zero_eval.metrics, cn.label, metric_name, "zero-shot backbone"),
            margin=cn.margin,
        )
        for cn, metric_name in zip(policy.canaries, canary_metrics, strict=True)
    ]
    return _split_metrics(zero_eval.metrics, eval_sets), canaries, zero_eval


def _record_decision(
    c: MlflowClient,
    home: Path,
    name: str,
    version: str,
    decision: GateDecision,
    artifacts: Sequence[Path],
    eval_sets: Sequence[tuple[str, str]],
    canary_sets: Sequence[tuple[str, str]],
    flow_tags: Mapping[str, str] | None,
) -> None:
    """Record the decision where a person looks (gate run, version tags, description), then promote if won."""
    gate_run_id = _log_gate_run(home, name, decision, artifacts, eval_sets, flow_tags, canary_sets)
    registry.tag_version(c, name, version, {**decision.tags(), "gate.run_id": gate_run_id})
    c.update_model_version(name, version, description=decision.to_markdown(name)[:5000])
    if decision.promote:
        registry.move_champion(c, name, version, reason=decision.reason, by="gate", action="promote")


@step(
    "promotion-gate",
    run_name="gate-{task}",
    tags=("mlflow", "gpu"),
    retries=3,
    retry_delay_seconds=(10.0, 60.0, 300.0),
    transient_only=True,
    profile_retries=True,
)
def run_gate(
    home: Path,
    task: str,
    policy: GatePolicy,
    eval_sets: Sequence[tuple[str, str]],
    challenger_version: str | None = None,
    flow_tags: Mapping[str, str] | None = None,
    traffic: tuple[str, str] | None = None,
) -> GateDecision:
    """Evaluate challenger vs champion (or the zero-shot bar), record the decision, move `champion` if won.

    With canaries in the policy, challenger and untrained backbone are also compared on each canary
    split, and a canary failure rejects the challenger whatever the in-domain outcome. A cascade
    challenger whose decisions on the evaluation pairs differ from its own cross-encoder's beyond its
    limit is rejected the same way. `traffic` (dataset, split) names the reviewed traffic split: both
    are scored there too and compared with intervals (`gate.TrafficCheck`), unless `policy.traffic`
    is `off`; with `required` a challenger clearly worse there is rejected.
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
    traffic_sets = [(traffic[0], traffic[1])] if traffic is not None and policy.traffic != "off" else []
    # a reviewed pair the challenger trained on would measure memory: dropped like a canary's
    excluded.update(canary_exclusions(home, traffic_sets, challenger.local_dir))
    scored_sets = list(dict.fromkeys([*eval_sets, *canary_sets, *traffic_sets]))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = home / "gate" / name / f"v{version}-{stamp}"
    chal_eval = evaluate(challenger.local_dir, home, scored_sets, excluded, out / "challenger")
    chal_metrics = _split_metrics(chal_eval.metrics, eval_sets)
    cascade = cascade_checks(challenger.local_dir, home, eval_sets, excluded, policy.cascade_max_disagreement)
    champ_eval, champ_error = _score_champion(
        home, name, version, champion_version, chal_eval, eval_sets, traffic_sets, excluded, out
    )
    champ_metrics = champ_eval.metrics if champ_eval is not None else None
    artifacts = [
        *chal_eval.artifacts,
        *(champ_eval.artifacts if champion_version != version and champ_eval else []),
    ]

    zero_metrics: dict[str, float] | None = None
    zero_eval: Evaluation | None = None
    canaries: list[CanaryResult] = []
    alone = champ_metrics is None  # no usable champion: the untrained backbone is the bar, traffic too
    zero_sets = list(
        dict.fromkeys([*(eval_sets if alone else []), *canary_sets, *(traffic_sets if alone else [])])
    )
    if zero_sets:
        zero_in_domain, canaries, zero_eval = _score_zero_shot_and_canaries(
            home, task, policy, challenger.local_dir, chal_eval.metrics, zero_sets, eval_sets,
            canary_metrics, excluded, out,
        )  # fmt: skip
        zero_metrics = zero_in_domain if alone else None
    traffic_check = None
    if traffic_sets:
        reference, reference_name = (
            (champ_eval, f"champion v{champion_version}")
            if champ_eval is not None
            else (zero_eval, "zero-shot")
        )
        traffic_check = _traffic_check(task, policy, traffic_sets[0], chal_eval, reference, reference_name)

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
        traffic_check,
    )
    if champion_version == version:
        decision.promote = False
        decision.reason = f"v{version} is already the champion; nothing to do"
    decision.wise_ft = wise_ft_record(challenger.local_dir)
    decision.precision = report_line(c.get_model_version(name, version).tags, challenger.local_dir)
    decision.excluded = {label: len(ids) for label, ids in excluded.items()}
    catalog = Catalog(home)
    decision.dataset_versions = {ds: catalog.current_version(ds) for ds, _ in scored_sets}
    _record_decision(c, home, name, version, decision, artifacts, eval_sets, canary_sets, flow_tags)
    return decision


def _traffic_check(
    task: str,
    policy: GatePolicy,
    traffic: tuple[str, str],
    challenger: Evaluation,
    reference: Evaluation | None,
    reference_name: str,
) -> TrafficCheck | None:
    """Challenger and reference on the reviewed traffic pairs, or None when nothing could be compared
    (no reference scored, or no reviewed pair left after exclusions)."""
    label = f"{traffic[0]}/{traffic[1]}"
    frame = challenger.scored.get(label)
    if reference is None or frame is None or frame.height == 0:
        return None
    metric_name = resolve_traffic_metric(task, policy.primary, split_is_binary(frame), policy.traffic_metric)
    f = traffic_figures(label, metric_name, challenger, reference)
    return TrafficCheck(
        label=label, metric=f.metric, pairs=f.n, challenger=f.model, challenger_low=f.model_low,
        challenger_high=f.model_high, reference=f.reference, reference_name=reference_name, delta=f.delta,
        delta_low=f.delta_low, delta_high=f.delta_high, mode=policy.traffic,
        min_pairs=policy.traffic_min_pairs,
    )  # fmt: skip


def promote_manual(home: Path, name: str, version: str, reason: str, by: str = "cli") -> str | None:
    """Operator override: make `version` champion without the gate, recording who and why."""
    if not reason.strip():
        raise ValueError("a manual promotion needs a --reason (it is written to the champion history)")
    c = registry.client(home)
    previous = registry.version_for(c, name, CHAMPION)
    registry.move_champion(c, name, version, reason=reason, by=by, action="promote")
    registry.tag_version(c, name, version, {"manual_promotion.reason": reason, "manual_promotion.by": by})
    return previous
