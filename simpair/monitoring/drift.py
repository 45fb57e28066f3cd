"""Tonight's traffic against the version's reference and its last nights: drift rows, the report, plots.

API:

- `DriftRow(statistic, test, value, threshold, against, alarm)`: one figure and its rule. `against` is
  `"reference"` (the version's own dev profile), `"history"` (the last nights of the same version,
  merged into one profile) or `"run"` (a health rate of tonight's run on its own).
- `DriftReport(run_id, model, version, rows, n_pairs, created)`: `alarms` (the rows that alarmed),
  `to_markdown()`, `to_json()`, `metrics()` (flat names for MLflow), `DriftRow.describe()` (one line
  for a notification).
- `compare(traffic, reference, history, policy) -> DriftReport`: every rule of `MonitorPolicy`.
- `write_report(report, traffic, reference, history, out_dir) -> list[Path]`: `monitor.json`,
  `monitor_reference.png` (tonight's histograms over the reference's) and `monitor_history.png` (each
  statistic over the last nights, tonight last, the reference as a dashed line).

The figures themselves (PSI, KS, MMD, the domain classifier) are `simpair.metrics.drift`'s.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from simpair.atomic import commit, temp_path
from simpair.metrics.drift import classifier_auc, ks_binned, mmd, psi
from simpair.monitoring.policy import STATISTICS, MonitorPolicy
from simpair.monitoring.profile import Profile

REPORT_FILE = "monitor.json"
REFERENCE_PNG = "monitor_reference.png"
HISTORY_PNG = "monitor_history.png"


class DriftRow(BaseModel):
    """One figure of tonight's traffic, the threshold it is held to, and whether it passed it."""

    # an undefined figure (different bins, one class) stays NaN through monitor.json, not null
    model_config = ConfigDict(ser_json_inf_nan="constants")

    statistic: str
    test: str
    value: float
    threshold: float
    against: Literal["reference", "history", "run"]
    alarm: bool
    note: str = ""

    def describe(self) -> str:
        """`score psi 0.41 > 0.25 against the reference`: what a notification says."""
        sign = "<" if self.test in {"mmd_p", "speed_ratio"} else ">"
        value, limit = _fmt(self.value), _fmt(self.threshold)
        return f"{self.statistic} {self.test} {value} {sign} {limit} against the {self.against}"


class DriftReport(BaseModel):
    """Every drift and health row of one scoring run; `alarms` the rows past their threshold."""

    run_id: str | None
    model: str | None
    version: str | None
    n_pairs: int = 0
    history_nights: int = 0
    rows: list[DriftRow] = Field(default_factory=list)
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def alarms(self) -> list[DriftRow]:
        return [row for row in self.rows if row.alarm]

    def to_json(self) -> str:
        return self.model_dump_json(indent=1)

    def metrics(self) -> dict[str, float]:
        """`<statistic>.<test>.<against>` -> value (NaNs left out), plus `alarms`: for MLflow metrics."""
        out = {f"{r.statistic}.{r.test}.{r.against}": r.value for r in self.rows if not math.isnan(r.value)}
        return {**out, "alarms": float(len(self.alarms))}

    def to_markdown(self) -> str:
        """A heading naming the run and its verdict, then one table row per figure (alarms first)."""
        verdict = f"**{len(self.alarms)} alarm(s)**" if self.alarms else "no alarm"
        lines = [
            f"### Drift of run {self.run_id or '-'}: {self.model or '-'} v{self.version or '-'}",
            "",
            f"{self.n_pairs} pairs against the version's reference and the last"
            f" {self.history_nights} night(s): {verdict}.",
            "",
            "| statistic | test | value | threshold | against | alarm |",
            "|---|---|---:|---:|---|---|",
        ]
        for row in sorted(self.rows, key=lambda r: not r.alarm):
            flag = "ALARM" if row.alarm else ""
            note = f" ({row.note})" if row.note else ""
            value, limit = _fmt(row.value), _fmt(row.threshold)
            lines.append(
                f"| {row.statistic} | {row.test} | {value} | {limit} | {row.against}{note} | {flag} |"
            )
        return "\n".join(lines) + "\n"


def _fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _nan_safe(value: float) -> float:
    return float(value) if value is not None else float("nan")


def _merged(history: list[Profile]) -> Profile | None:
    merged = None
    for night in history:
        try:
            merged = night if merged is None else merged.merge(night)
        except ValueError:  # another max_length or form: not the same traffic shape, skip it
            continue
    return merged


def _share(profile: Profile, statistic: str) -> float:
    h = profile.histograms.get(statistic)
    return float(h.share()[-1]) if h is not None and h.total else float("nan")


def _distribution_rows(
    traffic: Profile, base: Profile, against: Literal["reference", "history"], policy: MonitorPolicy
) -> list[DriftRow]:
    enough = min(traffic.n_pairs, base.n_pairs) >= policy.min_pairs
    note = "" if enough else f"under {policy.min_pairs} pairs: shown, never alarmed"

    def over(statistic: str, test: str, value: float, limit: float, extra: str = "") -> DriftRow:
        """A row that alarms when `value` passes `limit`, and only on enough pairs."""
        return DriftRow(
            statistic=statistic,
            test=test,
            value=value,
            threshold=limit,
            against=against,
            alarm=enough and value > limit,
            note="; ".join(part for part in (extra, note) if part),
        )

    rows = []
    for statistic in STATISTICS:
        mine, theirs = traffic.histograms.get(statistic), base.histograms.get(statistic)
        if mine is None or theirs is None or not mine.total or not theirs.total:
            continue
        if mine.edges != theirs.edges:
            rows.append(
                DriftRow(
                    statistic=statistic,
                    test="psi",
                    value=float("nan"),
                    threshold=0.0,
                    against=against,
                    alarm=False,
                    note="different bins",
                )
            )
            continue
        value = psi(theirs.counts, mine.counts)
        rows.append(over(statistic, "psi", value, policy.psi.get(statistic, math.inf)))
        d, p = ks_binned(theirs.counts, mine.counts)
        rows.append(over(statistic, "ks", d, policy.ks.get(statistic, math.inf), f"p={p:.2g}"))
    shift = abs(_share(traffic, "truncated") - _share(base, "truncated"))
    if not math.isnan(shift):
        rows.append(over("truncated", "share_shift", shift, policy.truncated_shift))
    if traffic.threshold is not None and base.threshold is not None:
        shift = abs(traffic.positive_rate - base.positive_rate)
        if not math.isnan(shift):
            rows.append(over("positive_rate", "shift", shift, policy.positive_rate_shift))
    return rows


def _vector_rows(
    traffic: Profile, base: Profile, against: Literal["reference", "history"], policy: MonitorPolicy
) -> list[DriftRow]:
    if traffic.vectors is None or base.vectors is None:
        return []
    x, y = base.vectors.array(), traffic.vectors.array()
    if x.shape[0] < 10 or y.shape[0] < 10 or x.shape[1] != y.shape[1]:
        return []
    auc = _nan_safe(classifier_auc(x, y))
    mmd2, p = mmd(x, y, permutations=policy.permutations)
    # as with the histograms, a small batch is shown but never alarms: ten vectors make the probe's AUC noise
    enough = min(traffic.n_pairs, base.n_pairs) >= policy.min_pairs
    auc_alarm = enough and auc > policy.vector_auc
    return [
        DriftRow(
            statistic="vectors",
            test="classifier_auc",
            value=auc,
            threshold=policy.vector_auc,
            against=against,
            alarm=auc_alarm,
            note=f"{len(y)} vs {len(x)} vectors" + ("" if enough else f"; under {policy.min_pairs} pairs"),
        ),
        # the kernel test is the confirmation, not a second alarm of its own: at 512 rows its p-value
        # finds shifts too small to matter, so it alarms only when the classifier does too
        DriftRow(
            statistic="vectors",
            test="mmd_p",
            value=p,
            threshold=policy.mmd_p_value,
            against=against,
            alarm=auc_alarm and p < policy.mmd_p_value,
            note=f"mmd2={mmd2:.3g}",
        ),
    ]


def _health_rows(traffic: Profile, history: list[Profile], policy: MonitorPolicy) -> list[DriftRow]:
    rules = policy.health
    rows = []
    for name, limit in (
        ("rejected", rules.rejected_rate),
        ("quarantined", rules.quarantined_rate),
        ("duplicates", rules.duplicates_rate),
        ("truncated", rules.truncated_rate),
    ):
        rate = traffic.rate(name)
        if not math.isnan(rate):
            rows.append(
                DriftRow(
                    statistic=name,
                    test="rate",
                    value=rate,
                    threshold=limit,
                    against="run",
                    alarm=rate > limit,
                )
            )
    speed = traffic.health.get("pairs_per_s")
    past = [n.health["pairs_per_s"] for n in history if n.health.get("pairs_per_s")]
    if speed and past:
        ratio = speed / float(np.median(past))
        rows.append(
            DriftRow(
                statistic="pairs_per_s",
                test="speed_ratio",
                value=ratio,
                threshold=rules.speed_drop,
                against="history",
                alarm=ratio < rules.speed_drop,
                note=f"{speed:.0f} pairs/s vs median {np.median(past):.0f}",
            )
        )
    return rows


def compare(
    traffic: Profile, reference: Profile | None, history: list[Profile], policy: MonitorPolicy
) -> DriftReport:
    """Every rule of `policy` on tonight's `traffic`: against the `reference`, against the `history`
    (the last `policy.history_nights` nights before tonight, merged), and the run's own health.

    `reference` may be None (a version with no reference yet): history and health rows only.
    """
    past = sorted(
        (n for n in history if n.run_id != traffic.run_id or n.run_id is None), key=lambda n: n.created
    )
    past = (
        [n for n in past if n.created <= traffic.created][-policy.history_nights :]
        if policy.history_nights
        else []
    )
    rows: list[DriftRow] = []
    if reference is not None:
        rows += _distribution_rows(traffic, reference, "reference", policy)
        rows += _vector_rows(traffic, reference, "reference", policy)
    merged = _merged(past)
    if merged is not None:
        rows += _distribution_rows(traffic, merged, "history", policy)
        rows += _vector_rows(traffic, merged, "history", policy)
    rows += _health_rows(traffic, past, policy)
    return DriftReport(
        run_id=traffic.run_id, model=traffic.model, version=traffic.version, n_pairs=traffic.n_pairs,
        history_nights=len(past), rows=rows,
    )  # fmt: skip


def _series(profile: Profile) -> dict[str, float]:
    """The per-night figures the history plot draws."""
    h = profile.histograms
    return {
        "mean tokens per text": h["tokens"].mean() if "tokens" in h else float("nan"),
        "mean rare-piece share": h["rare"].mean() if "rare" in h else float("nan"),
        "mean score": h["score"].mean() if "score" in h else float("nan"),
        "positive rate": profile.positive_rate,
        "truncated share": _share(profile, "truncated"),
        "rejected rate": profile.rate("rejected"),
    }


def _reference_png(traffic: Profile, reference: Profile | None, path: Path) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.2))
    axes = fig.subplots(1, len(STATISTICS))
    for ax, statistic in zip(axes, STATISTICS, strict=True):
        for profile, label, style in ((reference, "reference", "--"), (traffic, "tonight", "-")):
            if (
                profile is None
                or statistic not in profile.histograms
                or not profile.histograms[statistic].total
            ):
                continue
            h = profile.histograms[statistic]
            edges = np.asarray(h.edges)
            # token bins widen in the tail: drawn per token, so a wide bin is not a tall block
            share = h.share() / np.diff(edges) if statistic == "tokens" else h.share()
            ax.stairs(share, edges, label=label, linestyle=style)
        ax.set_title(statistic)
        if statistic == "tokens":
            ax.set_xlim(0, max(64, traffic.max_length * 1.5))
        ax.legend(fontsize=8)
    fig.suptitle(
        f"{traffic.model or ''} v{traffic.version or ''} run {traffic.run_id or ''}: tonight vs reference"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def _history_png(traffic: Profile, reference: Profile | None, history: list[Profile], path: Path) -> Path:
    from matplotlib.figure import Figure

    nights = [*sorted((n for n in history if n.run_id != traffic.run_id), key=lambda n: n.created), traffic]
    series = [_series(n) for n in nights]
    ref = _series(reference) if reference is not None else {}
    names = list(series[-1])
    fig = Figure(figsize=(11, 5.5))
    axes = fig.subplots(2, 3).ravel()
    x = np.arange(len(nights))
    for ax, name in zip(axes, names, strict=True):
        values = [s[name] for s in series]
        ax.plot(x, values, marker="o", markersize=3)
        # from zero: a night-to-night wobble of 0.003 must not fill the panel as a cliff would
        top = np.nanmax([*values, ref.get(name, float("nan")), 0.0])
        ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
        if name in ref and not math.isnan(ref[name]):
            ax.axhline(ref[name], linestyle="--", color="grey", label="reference")
            ax.legend(fontsize=8)
        ax.set_title(name, fontsize=9)
        ax.set_xticks(x[:: max(1, len(x) // 6)])
        ax.set_xticklabels(
            [nights[i].created.strftime("%m-%d") for i in x[:: max(1, len(x) // 6)]], fontsize=7
        )
    fig.suptitle(
        f"{traffic.model or ''} v{traffic.version or ''}: the last {len(nights)} run(s), tonight last"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def write_report(
    report: DriftReport,
    traffic: Profile,
    reference: Profile | None,
    history: list[Profile],
    out_dir: str | Path,
) -> list[Path]:
    """`monitor.json` and the two PNGs in `out_dir`; returns their paths (the JSON first)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(out_dir / REPORT_FILE)
    tmp.write_text(report.to_json(), encoding="utf-8")
    commit(tmp, out_dir / REPORT_FILE)
    return [
        out_dir / REPORT_FILE,
        _reference_png(traffic, reference, out_dir / REFERENCE_PNG),
        _history_png(traffic, reference, history, out_dir / HISTORY_PNG),
    ]
