"""One scoring run as the night's report and the alarm lines show it: its counts and its drift table.

Apart from the report (`simpair.nightly.report`) so that `simpair score` can print a run's alarm lines
without importing what the report's night summary needs (the training configs, torch): read from
the run's summary fields or its `monitor.json`, plain JSON.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

SUMMARY_MONITOR_FIELD = "monitor"  # the scoring summary's field naming its run's monitor.json


class DriftRow(BaseModel):
    """One statistic of a scoring run's traffic against one reference, as read back from a
    `monitor.json` row (`simpair.monitoring.drift.DriftRow`, with a missing figure kept as None)."""

    statistic: str
    test: str = ""
    value: float | None = None
    threshold: float | None = None
    against: str = ""
    alarm: bool = False
    note: str = ""

    def line(self) -> str:
        """`score psi 0.41 > 0.25 against the reference` (the monitor's own wording: which side of
        the threshold alarms depends on the test); plain `value, threshold` for a row it does not know."""
        from simpair.monitoring.drift import DriftRow as MonitorRow  # scipy: only when an alarm is told

        try:
            row = MonitorRow.model_validate(
                {**self.model_dump(), "value": _nan(self.value), "threshold": _nan(self.threshold)}
            )
        except ValueError:
            return f"{self.statistic} {self.test} {num(self.value)}, threshold {num(self.threshold)}"
        return row.describe()


class ScoredRun(BaseModel):
    """One scoring run as the report shows it: its counts and its drift table."""

    run_id: str
    model: str
    version: str
    finished_at: str | None = None
    files_scored: int | None = None
    files_quarantined: int | None = None
    rows_scored: int | None = None
    rows_rejected: int | None = None
    rows_truncated: int | None = None
    pairs_per_s: float | None = None
    precision: str | None = None
    drift: list[DriftRow] = Field(default_factory=list)
    alarms: int = 0
    monitor: str | None = None  # the run's monitor.json
    plots: list[str] = Field(default_factory=list)  # its PNGs, where the monitor wrote them

    @classmethod
    def from_monitor(cls, path: str | Path) -> ScoredRun:
        """A run read back from its `monitor.json` (the night's view of runs it did not start)."""
        path = Path(path)
        data = json.loads(path.read_text(encoding="utf-8"))
        run = cls(
            run_id=str(data.get("run_id") or path.parent.name),
            model=str(data.get("model") or path.parent.parent.parent.name),
            version=str(data.get("version") or path.parent.parent.name),
            finished_at=data.get("created")
            or datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds"),
            rows_scored=data.get("n_pairs"),
        )
        return run.with_monitor(path, data)

    @classmethod
    def from_summary(cls, summary: dict[str, Any], monitor: str | Path | None = None) -> ScoredRun:
        """A run from its scoring summary's fields (`ScoreSummary.to_dict()`) and, when the run was
        monitored, its `monitor.json` (`monitor`, else the path the summary names)."""
        monitor = monitor or summary.get(SUMMARY_MONITOR_FIELD)
        run = cls(
            run_id=str(summary["run_id"]),
            model=str(summary["model_name"]),
            version=str(summary["model_version"]),
            finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
            **{k: summary.get(k) for k in _COUNTS},
            precision=summary.get("precision"),
        )
        if monitor is not None and Path(monitor).is_file():
            run = run.with_monitor(Path(monitor))
        return run

    def with_monitor(self, path: Path, data: dict[str, Any] | None = None) -> ScoredRun:
        """This run with the drift table, alarm count and plots of its monitor folder."""
        data = json.loads(path.read_text(encoding="utf-8")) if data is None else data
        rows = [DriftRow.model_validate(_row(r)) for r in data.get("rows") or []]
        alarms = data.get("alarms")
        alarms = len(alarms) if isinstance(alarms, list) else int(alarms or sum(r.alarm for r in rows))
        plots = sorted(str(p) for p in path.parent.glob("*.png"))
        return self.model_copy(update={"drift": rows, "alarms": alarms, "monitor": str(path), "plots": plots})

    def alarm_lines(self, report: str | Path | None = None) -> list[str]:
        """One line per alarmed statistic, naming the statistic, its value, the threshold, the run and
        (when written) the night's report: what stderr and the notification say."""
        where = f"; report {report}" if report else ""
        return [
            f"drift alarm: {row.line()}; scoring run {self.run_id} of {self.model} v{self.version}{where}"
            for row in self.drift
            if row.alarm
        ]


_COUNTS = (
    "files_scored",
    "files_quarantined",
    "rows_scored",
    "rows_rejected",
    "rows_truncated",
    "pairs_per_s",
)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A monitor row with numbers as floats (NaN and missing become None) and `against` as text."""
    out = dict(row)
    for key in ("value", "threshold"):
        value = out.get(key)
        out[key] = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    out["against"] = str(out.get("against") or "")
    out["statistic"] = str(out.get("statistic") or "?")
    out["test"] = str(out.get("test") or "")
    out["alarm"] = bool(out.get("alarm"))
    out["note"] = str(out.get("note") or "")
    return out


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def num(value: float | int | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1:
        return str(int(value))
    return f"{value:.4g}"
