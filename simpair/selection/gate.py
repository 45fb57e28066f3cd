"""The promotion gate: move `champion` only for a measurable improvement on the same frozen data.

Challenger and champion are re-evaluated in one pass on the same evaluation split(s) at the dataset
versions current now (numbers stored under another data version are never trusted), with pairs that leak
from any training split excluded. The challenger wins when its primary metric improves by at least
`margin` and no guardrail metric drops by more than its tolerance. With no champion, or a champion whose
artifacts are corrupt or missing, the bar is the untrained backbone used zero-shot as a bi-encoder with
cosine similarity: a first model must at least beat doing nothing.

Canaries guard the other side: a fine-tuned model can beat its backbone in-domain while falling below it
off its training domain. Each canary is an out-of-domain split on which the challenger may fall at most
`margin` below the untrained backbone; one canary below that rejects the challenger whatever the
in-domain result.

A bi -> cross cascade is judged as the model it is (its own outputs, against the same champion and bar),
and one promise more: its band was fitted on dev so that few decisions differ from its own cross-encoder
alone. The gate checks that promise on the evaluation pairs, which the band never saw; a cascade whose
share of differing decisions there exceeds its limit is rejected whatever the in-domain result.

The traffic check reads what reviewers labelled: the `traffic` split holds the reviewed pairs of the
review queue's `random` part, a uniform sample of what was scored and never chosen by a model, so a
figure there estimates the figure on the traffic itself. Challenger and reference (the champion, or the
untrained backbone when there is none) are scored on the same reviewed pairs, each with a 95% paired
bootstrap interval. `traffic: report` (the default) records it; `traffic: required` also rejects a
challenger that is clearly worse there: the whole 95% interval of (challenger - reference) lies below
0. A drop within the noise of a hundred reviews never blocks a challenger that won in-domain; a drop
the interval rules out always does. Fewer than `traffic_min_pairs` reviewed pairs: reported, not judged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from simpair.evaluation.common_set import THRESHOLD_FREE_BINARY

DEFAULT_PRIMARY = {"paraphrase": "f1", "sts": "spearman"}
DEFAULT_GUARDRAILS = {"paraphrase": {"accuracy": 0.01}, "sts": {"pearson": 0.01}}
# A graded model tunes no decision threshold, so on a binary split only these figures mean anything.
CANARY_TOLERANCE = 1e-12  # float noise: a challenger exactly `margin` below the backbone passes


class Canary(BaseModel):
    """One out-of-domain split the challenger must not fall behind the untrained backbone on."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    split: str
    metric: str | None = Field(
        None,
        description="default: the task's primary on a split of the task's own kind, roc_auc on a binary "
        "split for sts, spearman on a graded split for paraphrase",
    )
    margin: float = Field(0.02, ge=0.0, description="how far below the zero-shot backbone it may fall")

    @property
    def label(self) -> str:
        return f"{self.dataset}/{self.split}"

    def resolve_metric(self, task: str, primary: str, binary: bool) -> str:
        """The metric compared on this canary, given whether its split has binary labels.

        Cross-kind defaults are threshold-free (ROC-AUC, Spearman), so no threshold tuned on another
        kind of data decides the comparison; a graded model on a binary split gets nothing else.
        """
        if task == "sts" and binary:
            chosen = self.metric or "roc_auc"
            if chosen not in THRESHOLD_FREE_BINARY:
                raise ValueError(
                    f"canary {self.label}: {chosen!r} needs a decision threshold, which a graded (sts) "
                    "model does not have; use roc_auc on a binary split"
                )
            return chosen
        if task == "paraphrase" and not binary:
            return self.metric or "spearman"
        return self.metric or primary


@dataclass
class CanaryResult:
    """Challenger and untrained backbone on one canary split, on the same pairs."""

    label: str
    metric: str
    challenger: float
    zero_shot: float
    margin: float

    @property
    def delta(self) -> float:
        return self.challenger - self.zero_shot

    @property
    def passed(self) -> bool:
        """An undefined (NaN) challenger figure fails; an undefined backbone figure is beatable."""
        if math.isnan(self.challenger):
            return False
        if math.isnan(self.zero_shot):
            return True
        return self.delta >= -self.margin - CANARY_TOLERANCE

    def describe(self) -> str:
        if self.passed:
            return (
                f"canary {self.label}: {self.metric} {self.challenger:.4f} vs the untrained backbone's "
                f"{self.zero_shot:.4f} ({self.delta:+.4f}, margin {self.margin:.4f})"
            )
        if math.isnan(self.challenger):
            return f"canary {self.label}: challenger {self.metric} is undefined (NaN)"
        return (
            f"canary {self.label}: {self.metric} {self.challenger:.4f} is {-self.delta:.4f} below the "
            f"untrained backbone's {self.zero_shot:.4f} (margin {self.margin:.4f})"
        )


@dataclass
class CascadeCheck:
    """A cascade challenger against its own cross-encoder alone, on one evaluation split's common pairs.

    `share_to_cross` is what the cascade costs (the pairs the cross-encoder scored), `disagreement` what
    it gives up (decisions that differ from the cross-encoder's); `limit` bounds the latter.
    """

    label: str
    pairs: int
    share_to_cross: float
    disagreement: float
    limit: float

    @property
    def differing(self) -> int:
        return round(self.disagreement * self.pairs)

    @property
    def passed(self) -> bool:
        return self.disagreement <= self.limit + CANARY_TOLERANCE

    def describe(self) -> str:
        figures = (
            f"{self.disagreement:.2%} of decisions ({self.differing} of {self.pairs} pairs) differ from its "
            f"own cross-encoder"
        )
        sent = f"{self.share_to_cross:.1%} of pairs sent to the cross-encoder"
        if self.passed:
            return f"cascade {self.label}: {figures} (limit {self.limit:.2%}); {sent}"
        return f"cascade {self.label}: {figures}, above the limit {self.limit:.2%}; {sent}"


@dataclass
class TrafficCheck:
    """Challenger and reference (champion or untrained backbone) on the reviewed traffic pairs.

    Intervals are 95% paired bootstrap ones (`simpair.metrics.paired_interval`); `delta_*` bound
    challenger - reference. `mode` and `min_pairs` are the policy's `traffic` and `traffic_min_pairs`.
    """

    label: str
    metric: str
    pairs: int
    challenger: float
    challenger_low: float
    challenger_high: float
    reference: float
    reference_name: str
    delta: float
    delta_low: float
    delta_high: float
    mode: str
    min_pairs: int

    @property
    def judged(self) -> bool:
        """Whether the check may reject: `required`, enough reviewed pairs and a defined interval."""
        return self.mode == "required" and self.pairs >= self.min_pairs and math.isfinite(self.delta_high)

    @property
    def passed(self) -> bool:
        """Failed only when judged and the whole interval of the difference lies below 0."""
        return not self.judged or self.delta_high >= -CANARY_TOLERANCE

    def figures(self) -> str:
        mine = _span(self.challenger_low, self.challenger_high)
        difference = _span(self.delta_low, self.delta_high, signed=True)
        return (
            f"{self.metric} {self.challenger:.4f} (95% interval {mine}) vs {self.reference_name} "
            f"{self.reference:.4f}: {self.delta:+.4f} (95% interval {difference}) "
            f"over {self.pairs} reviewed pairs"
        )

    def describe(self) -> str:
        where = f"traffic {self.label}"
        if self.mode == "required" and self.pairs < self.min_pairs:
            return (
                f"{where}: {self.figures()}; reported, not judged: fewer than {self.min_pairs} reviewed "
                "pairs (traffic_min_pairs)"
            )
        if not self.judged:
            return f"{where}: {self.figures()}" + (
                "; reported, not judged (interval undefined)" if self.mode == "required" else " (reported)"
            )
        if self.passed:
            return f"{where}: {self.figures()}; not clearly worse"
        return f"{where}: {self.figures()}: the challenger is worse there (the whole interval is below 0)"


def _span(low: float, high: float, signed: bool = False) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undefined"
    form = "{:+.4f}" if signed else "{:.4f}"
    return f"{form.format(low)} to {form.format(high)}"


def resolve_traffic_metric(task: str, primary: str, binary: bool, chosen: str | None = None) -> str:
    """The figure read on the traffic split: `chosen`, else the task's primary on labels of its own kind,
    roc_auc for a graded (sts) model on yes/no reviews, spearman for a paraphrase model on 0-5 reviews."""
    if chosen:
        return chosen
    if task == "sts" and binary:
        return "roc_auc"
    if task == "paraphrase" and not binary:
        return "spearman"
    return primary


class GatePolicy(BaseModel):
    """What "measurably better" means for one task (set per task in the nightly profile)."""

    primary: str
    margin: float = Field(0.005, ge=0.0, description="minimum improvement of the primary metric")
    guardrails: dict[str, float] = Field(default_factory=dict, description="metric -> max allowed drop")
    zero_shot_margin: float = Field(0.0, ge=0.0, description="first version must beat zero-shot by this")
    zero_shot_backbone: str | None = Field(None, description="default: the challenger's own backbone")
    canaries: list[Canary] = Field(
        default_factory=list, description="out-of-domain splits compared with the untrained backbone"
    )
    cascade_max_disagreement: float | None = Field(
        None,
        ge=0.0,
        lt=1.0,
        description="a cascade's largest share of evaluation decisions that may differ from its own "
        "cross-encoder alone; default: the limit its band was fitted to on dev (max_disagreement)",
    )
    traffic: Literal["report", "required", "off"] = Field(
        "report",
        description="the reviewed traffic split (the review queue's random pairs): `report` shows challenger "
        "and champion there with 95% intervals; `required` also rejects a challenger whose whole interval "
        "of the difference lies below 0; `off` skips it",
    )
    traffic_metric: str | None = Field(
        None,
        description="figure read on the traffic split; default: the primary (roc_auc for sts on yes/no "
        "reviews, spearman for paraphrase on 0-5 reviews)",
    )
    traffic_min_pairs: int = Field(
        50, ge=1, description="fewer reviewed traffic pairs than this: reported, never judged"
    )

    @classmethod
    def default(cls, task: str) -> GatePolicy:
        return cls(primary=DEFAULT_PRIMARY[task], guardrails=dict(DEFAULT_GUARDRAILS[task]))


@dataclass
class GateDecision:
    """Outcome of one gate evaluation, with everything needed to explain it later."""

    promote: bool
    reason: str
    primary: str
    challenger_version: str
    challenger: dict[str, float]
    champion_version: str | None = None
    champion: dict[str, float] | None = None
    zero_shot: dict[str, float] | None = None
    champion_error: str | None = None
    excluded: dict[str, int] = field(default_factory=dict)
    dataset_versions: dict[str, str] = field(default_factory=dict)
    canaries: list[CanaryResult] = field(default_factory=list)
    # a cascade challenger against its own cross-encoder, per evaluation split (empty for other kinds)
    cascade: list[CascadeCheck] = field(default_factory=list)
    # the WiSE-FT path the challenger was chosen from (`simpair.selection.wise_path`), when it was
    wise_ft: dict[str, Any] | None = None
    # the rung `--precision auto` scores the challenger in, and why (`precision_verdict.report_line`)
    precision: str | None = None
    # challenger and reference on the reviewed traffic pairs, when a traffic split was scored
    traffic: TrafficCheck | None = None

    @property
    def outcome(self) -> str:
        return "promoted" if self.promote else "rejected"

    def tags(self) -> dict[str, str]:
        """Version tags recording the decision and both metric sets."""
        out = {
            "gate.decision": self.outcome,
            "gate.reason": self.reason,
            "gate.primary": self.primary,
            "gate.compared_with": self.champion_version or ("zero-shot" if self.zero_shot else "none"),
        }
        for prefix, metrics in (
            ("challenger", self.challenger),
            ("champion", self.champion),
            ("zero_shot", self.zero_shot),
        ):
            for key, value in (metrics or {}).items():
                out[f"gate.{prefix}.{key}"] = f"{value:.6g}"
        for canary in self.canaries:
            key = f"gate.canary.{canary.label}.{canary.metric}"
            out[f"{key}.challenger"] = f"{canary.challenger:.6g}"
            out[f"{key}.zero_shot"] = f"{canary.zero_shot:.6g}"
            out[f"{key}.margin"] = f"{canary.margin:.6g}"
        for check in self.cascade:
            key = f"gate.cascade.{check.label}"
            out[f"{key}.pairs"] = str(check.pairs)
            out[f"{key}.share_to_cross"] = f"{check.share_to_cross:.6g}"
            out[f"{key}.disagreement"] = f"{check.disagreement:.6g}"
            out[f"{key}.limit"] = f"{check.limit:.6g}"
        if self.traffic:
            t = self.traffic
            figures = {
                "pairs": t.pairs, "challenger": t.challenger, "challenger_low": t.challenger_low,
                "challenger_high": t.challenger_high, "reference": t.reference, "delta": t.delta,
                "delta_low": t.delta_low, "delta_high": t.delta_high,
            }  # fmt: skip
            out |= {f"gate.traffic.{k}": f"{v:.6g}" for k, v in figures.items()}
            out |= {
                "gate.traffic.split": t.label, "gate.traffic.metric": t.metric, "gate.traffic.mode": t.mode,
                "gate.traffic.reference_name": t.reference_name,
                "gate.traffic.result": ("pass" if t.passed else "fail") if t.judged else "reported",
            }  # fmt: skip
        for key, value in self.excluded.items():
            out[f"gate.leakage_excluded.{key}"] = str(value)
        for key, value in self.dataset_versions.items():
            out[f"gate.dataset_version.{key}"] = value
        if self.champion_error:
            out["gate.champion_error"] = self.champion_error[:1000]
        if self.wise_ft:
            out["wise_ft.alpha"] = f"{self.wise_ft['alpha']:g}"
            out["wise_ft.rule"] = self.wise_ft["rule"]
            out["wise_ft.reason"] = self.wise_ft["reason"][:1000]
            out["wise_ft.by_alpha"] = json.dumps(self.wise_ft["by_alpha"], sort_keys=True)[:5000]
            out["wise_ft.backbone"] = json.dumps(self.wise_ft["backbone"], sort_keys=True)
            out["wise_ft.splits_read"] = ",".join(self.wise_ft.get("splits_read", []))
            if self.wise_ft.get("dev_criterion"):
                out["wise_ft.dev_criterion"] = self.wise_ft["dev_criterion"][:1000]
        return out

    def to_markdown(self, model_name: str) -> str:
        """Human-readable report (Prefect artifact, version description)."""
        other = f"champion v{self.champion_version}" if self.champion else "zero-shot backbone"
        against = self.champion if self.champion else (self.zero_shot or {})
        keys = sorted(set(self.challenger) | set(against))
        lines = [
            f"### {model_name}: challenger v{self.challenger_version} **{self.outcome}**",
            "",
            f"Reason: {self.reason}",
            "",
            *([f"Precision (auto): {self.precision}", ""] if self.precision else []),
            f"| metric | challenger v{self.challenger_version} | {other} | delta |",
            "|---|---|---|---|",
        ]
        for key in keys:
            a, b = self.challenger.get(key), against.get(key)
            delta = f"{a - b:+.4f}" if a is not None and b is not None else ""
            lines.append(
                f"| {key}{' (primary)' if key == self.primary else ''} | {_fmt(a)} | {_fmt(b)} | {delta} |"
            )
        if self.canaries:
            lines += [
                "",
                "Canaries (off-domain: the challenger may fall at most the margin below the untrained "
                "backbone):",
                "",
                f"| canary | metric | challenger v{self.challenger_version} | zero-shot | delta | margin "
                "| result |",
                "|---|---|---|---|---|---|---|",
            ]
            for c in self.canaries:
                lines.append(
                    f"| {c.label} | {c.metric} | {_fmt(c.challenger)} | {_fmt(c.zero_shot)} "
                    f"| {c.delta:+.4f} | {c.margin:.4f} | {'pass' if c.passed else 'FAIL'} |"
                )
        if self.cascade:
            lines += [
                "",
                "Cascade (bi -> cross) on the evaluation pairs: the share its cross-encoder scored, and the "
                "decisions that differ from its cross-encoder alone (at most the limit):",
                "",
                "| split | pairs | sent to the cross-encoder | differ from its cross-encoder | limit "
                "| result |",
                "|---|---|---|---|---|---|",
            ]
            for k in self.cascade:
                lines.append(
                    f"| {k.label} | {k.pairs} | {k.share_to_cross:.1%} | {k.disagreement:.2%} "
                    f"({k.differing}) | {k.limit:.2%} | {'pass' if k.passed else 'FAIL'} |"
                )
        if self.traffic:
            lines += ["", *traffic_markdown(self.traffic, self.challenger_version)]
        if self.wise_ft:
            lines += ["", wise_ft_markdown(self.wise_ft).rstrip("\n")]
        if self.champion_error:
            lines += ["", f"Champion v{self.champion_version} could not be evaluated: {self.champion_error}"]
        if self.excluded:
            shown = ", ".join(f"{k}: {v}" for k, v in self.excluded.items())
            lines += ["", f"Leaked pairs excluded from evaluation: {shown}"]
        if self.dataset_versions:
            shown = ", ".join(f"{k}={v}" for k, v in self.dataset_versions.items())
            lines += ["", f"Evaluation data versions: {shown}"]
        return "\n".join(lines) + "\n"


def traffic_markdown(t: TrafficCheck, challenger_version: str) -> list[str]:
    """The traffic check as markdown lines: what the figures are, the table, and the verdict."""
    if t.judged:
        verdict = "pass: not clearly worse" if t.passed else "FAIL: the whole interval is below 0"
    elif t.mode == "required" and t.pairs < t.min_pairs:
        verdict = f"reported, not judged: fewer than {t.min_pairs} reviewed pairs"
    else:
        verdict = "reported, not judged" + (" (interval undefined)" if t.mode == "required" else "")
    return [
        f"Accuracy on your traffic ({t.label}: reviewed pairs drawn uniformly from the scored traffic; "
        f"{t.metric}, 95% paired bootstrap intervals; traffic: {t.mode}):",
        "",
        f"| reviewed pairs | challenger v{challenger_version} | {t.reference_name} | difference | result |",
        "|---|---|---|---|---|",
        f"| {t.pairs} | {_fmt(t.challenger)} ({_span(t.challenger_low, t.challenger_high)}) "
        f"| {_fmt(t.reference)} | {t.delta:+.4f} ({_span(t.delta_low, t.delta_high, signed=True)}) "
        f"| {verdict} |",
    ]


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def wise_ft_markdown(record: Mapping[str, Any]) -> str:
    """A WiSE-FT path record as markdown: alpha, dev and each choice canary, the backbone's row last."""
    canaries = list(record["backbone"])
    head = ["alpha", f"dev {record['dev_metric']}", *canaries]
    lines = [
        f"WiSE-FT path of `{record['from_model']}`, chosen alpha **{record['alpha']:g}**: {record['reason']}",
        "",
        f"Rule: {record['rule']}. Read for the choice: {', '.join(record.get('splits_read', []))}.",
        *([f"Dev criterion: {record['dev_criterion']}."] if record.get("dev_criterion") else []),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for alpha, row in sorted(record["by_alpha"].items(), key=lambda kv: -float(kv[0])):
        mark = " (chosen)" if float(alpha) == float(record["alpha"]) else ""
        cells = [f"{alpha}{mark}", *(_fmt(row[k]) for k in ["dev", *canaries])]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("| backbone | | " + " | ".join(_fmt(record["backbone"][c]) for c in canaries) + " |")
    return "\n".join(lines) + "\n"


def _or_floor(value: float) -> float:
    """An undefined (NaN) reference metric counts as the worst possible value, so it can be beaten."""
    return -1.0e9 if math.isnan(value) else value


def metric(metrics: Mapping[str, float], name: str) -> float:
    """A metric by exact key, else the mean over keys ending in `/<name>` (one per evaluation split).

    With several evaluation splits the gate compares the unweighted mean, so no split dominates by size.
    """
    if name in metrics:
        return float(metrics[name])
    hits = [float(metrics[k]) for k in metrics if k.endswith(f"/{name}") or k.endswith(f".{name}")]
    if not hits:
        raise KeyError(f"metric {name!r} not among {sorted(metrics)}")
    return float(sum(hits) / len(hits))


def decide(
    policy: GatePolicy,
    challenger_version: str,
    challenger: Mapping[str, float],
    champion_version: str | None = None,
    champion: Mapping[str, float] | None = None,
    zero_shot: Mapping[str, float] | None = None,
    champion_error: str | None = None,
    canaries: Sequence[CanaryResult] = (),
    cascade: Sequence[CascadeCheck] = (),
    traffic: TrafficCheck | None = None,
) -> GateDecision:
    """Pure decision rule; every branch writes a reason a person can check against the numbers.

    The in-domain rule decides first; a failed canary, cascade or (`traffic: required`) traffic check
    then overrides any promotion, and the reason keeps the in-domain verdict after the failures, so
    both are on record. A traffic check that is only reported adds its figures to the reason.
    """
    decision = _decide_in_domain(
        policy, challenger_version, challenger, champion_version, champion, zero_shot, champion_error
    )
    decision.canaries = list(canaries)
    decision.cascade = list(cascade)
    decision.traffic = traffic
    checks: list[CanaryResult | CascadeCheck | TrafficCheck] = [*decision.canaries, *decision.cascade]
    failed = [c.describe() for c in [*checks, *([traffic] if traffic else [])] if not c.passed]
    if failed:
        decision.promote = False
        decision.reason = "; ".join(failed) + f". In-domain: {decision.reason}"
        return decision
    if traffic is not None:
        decision.reason = f"{decision.reason}. {traffic.describe()[0].upper()}{traffic.describe()[1:]}"
    if decision.canaries:
        shown = "; ".join(c.describe() for c in decision.canaries)
        decision.reason = f"{decision.reason}. Canaries passed: {shown}"
    if decision.cascade:
        shown = "; ".join(c.describe() for c in decision.cascade)
        decision.reason = f"{decision.reason}. Cascade within its limit: {shown}"
    return decision


def _decide_in_domain(
    policy: GatePolicy,
    challenger_version: str,
    challenger: Mapping[str, float],
    champion_version: str | None,
    champion: Mapping[str, float] | None,
    zero_shot: Mapping[str, float] | None,
    champion_error: str | None,
) -> GateDecision:
    chal = dict(challenger)
    base = GateDecision(
        promote=False,
        reason="",
        primary=policy.primary,
        challenger_version=challenger_version,
        challenger=chal,
        champion_version=champion_version,
        champion=dict(champion) if champion is not None else None,
        zero_shot=dict(zero_shot) if zero_shot is not None else None,
        champion_error=champion_error,
    )
    p_chal = metric(chal, policy.primary)
    if math.isnan(p_chal):
        base.reason = f"challenger {policy.primary} is undefined (NaN: constant predictions?); not promoted"
        return base
    if champion is not None:
        p_champ = _or_floor(metric(champion, policy.primary))
        gain = p_chal - p_champ
        if gain < policy.margin:
            base.reason = (
                f"{policy.primary} {p_chal:.4f} vs champion v{champion_version} {p_champ:.4f}: "
                f"gain {gain:+.4f} is below the margin {policy.margin:.4f}"
            )
            return base
        for name, tolerance in policy.guardrails.items():
            drop = _or_floor(metric(champion, name)) - _or_floor(metric(chal, name))
            if drop > tolerance:
                base.reason = (
                    f"{policy.primary} improved by {gain:+.4f} but guardrail {name} dropped by {drop:.4f} "
                    f"(tolerance {tolerance:.4f})"
                )
                return base
        base.promote = True
        base.reason = (
            f"{policy.primary} {p_chal:.4f} beats champion v{champion_version} {p_champ:.4f} by {gain:+.4f} "
            f"(margin {policy.margin:.4f}); guardrails {sorted(policy.guardrails) or 'none'} within tolerance"
        )
        return base
    prefix = (
        f"champion v{champion_version} is unusable ({champion_error}); "
        if champion_error
        else "no champion yet; "
    )
    if zero_shot is None:
        base.reason = prefix + "no zero-shot baseline could be computed, so nothing is promoted"
        return base
    p_zero = _or_floor(metric(zero_shot, policy.primary))
    gain = p_chal - p_zero
    if gain > 0 and gain >= policy.zero_shot_margin:
        base.promote = True
        base.reason = (
            prefix + f"{policy.primary} {p_chal:.4f} beats the untrained backbone zero-shot {p_zero:.4f} "
            f"by {gain:+.4f}"
        )
    else:
        base.reason = (
            prefix + f"{policy.primary} {p_chal:.4f} does not beat the untrained backbone zero-shot "
            f"{p_zero:.4f} (needs > {p_zero + policy.zero_shot_margin:.4f})"
        )
    return base
