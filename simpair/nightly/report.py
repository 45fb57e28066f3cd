"""The night's report: one markdown page, with its plots, of what a night did from ingest to drift.

A team reads one page a morning, not five artifacts: what was ingested and quarantined, what trained
and how long it took, each gate decision with its canaries and precision verdict, what was scored,
the drift table of every scoring run (with the monitor's PNGs copied beside the page), and the
accuracy measured on reviewed traffic. It lands at `<home>/reports/<date>-<run>/night.md`
(`<run>`: the first 8 characters of the night's flow run id, or `local-HHMMSS` for an in-process
night) beside `night.json`, the same report as data, and the flows publish it as the Prefect
markdown artifact `night-report`.

The retrain night and the scoring runs are separate flows (scoring starts when the night completes,
and on its own cron), so the page is written in two moves:
- the night's end writes it (`publish_night_report`), with the scoring runs that finished in the 24 h
  before it in the scoring output folder (their `_monitor/<model>/<version>/<run>/monitor.json`), or
  "no scoring in this night";
- a night that fails writes it too (`page_on_failure`: status failed, the error), so the failure
  notification's link leads to a page;
- every scoring run adds itself (`add_scoring_run`) to the newest report begun in the last 24 h, or,
  with none, begins one of its own that says no retrain ran. The alarm a scoring run sends names
  that page.
The domain never reads a scoring ledger here (scoring sits on a higher floor): a run arrives as its
summary's fields or as its `monitor.json`, plain JSON.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import filelock
from pydantic import BaseModel, Field

from simpair.atomic import atomic_write_text
from simpair.nightly.scored_run import ScoredRun, num
from simpair.nightly.summary import NightlySummary, TaskOutcome, TrafficAccuracy
from simpair.stages import StageRunner, step

REPORTS_DIR = "reports"
PAGE = "night.md"
DATA = "night.json"
PLOTS_DIR = "plots"
MONITOR_DIR = "_monitor"  # beside the ledger in a scoring output folder: <model>/<version>/<run>/
MONITOR_FILE = "monitor.json"
# a scoring run joins the newest report begun this long before it; the night reads scoring runs as old
JOIN_WINDOW = timedelta(hours=24)
SCORED_ENV = "SIMPAIR_SCORED"  # the nightly-score deployment's output folder (flows/deployments.py)
NO_SCORING = "no scoring in this night"


class NightReport(BaseModel):
    """The night as one page: the retrain's summary (None when no retrain ran) and its scoring runs."""

    name: str  # the folder under <home>/reports: <date>-<run>
    started_at: str  # when the report was begun (UTC ISO); scoring runs join within JOIN_WINDOW of it
    night: NightlySummary | None = None
    scoring: list[ScoredRun] = Field(default_factory=list)
    scoring_out: str | None = None  # the output folder whose runs the night read

    @property
    def alarms(self) -> int:
        return sum(run.alarms for run in self.scoring)

    def with_run(self, run: ScoredRun) -> NightReport:
        """The report with `run` added, or put in place of its earlier entry (a retried flow)."""
        runs = [r for r in self.scoring if r.run_id != run.run_id] + [run]
        return self.model_copy(update={"scoring": runs})

    def to_markdown(self, plots: dict[str, str] | None = None) -> str:
        """The page; `plots` maps a PNG's original path to its link beside the page."""
        plots = plots or {}
        lines = [f"# The night of {self.name[:10]} (`{self.name}`)", ""]
        night = self.night
        if night is not None:
            lines += [f"Nightly retrain ({night.profile}): **{night.status}**. {night.message}", ""]
        else:
            lines += ["No retrain ran in this night: the scoring runs below are all it did.", ""]
        if self.alarms:
            lines += [f"**{self.alarms} drift or health alarm(s)**: see Drift below.", ""]
        lines += _ingest_section(night)
        lines += _training_section(night)
        lines += _gate_section(night)
        lines += _scoring_section(self)
        lines += _drift_section(self, plots)
        lines += _traffic_section(night)
        return "\n".join(lines).rstrip() + "\n"


def _cell(value: object) -> str:
    return " ".join(str(value if value is not None else "-").split()).replace("|", "\\|")


def _seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _ingest_section(night: NightlySummary | None) -> list[str]:
    lines = ["## Ingested and quarantined", ""]
    if night is None or not night.ingest:
        return [*lines, "Nothing ingested by a retrain in this night.", ""]
    lines += [
        "| source | split | status | version | clean | quarantined | reasons |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for row in night.ingest:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(row.reasons.items(), key=lambda kv: -kv[1]))
        status = f"{row.status}: {row.error}" if row.error else row.status
        lines.append(
            f"| {row.dataset} | {row.split or '-'} | {_cell(status)} | {row.version or '-'} | "
            f"{row.clean if row.split else '-'} | {row.quarantined if row.split else '-'} | "
            f"{_cell(reasons or '-')} |"
        )
    total = sum(r.quarantined for r in night.ingest)
    return [*lines, "", f"Quarantined tonight: {total} record(s), each kept with its reason.", ""]


def _training_section(night: NightlySummary | None) -> list[str]:
    lines = ["## Trained", ""]
    if night is None:
        return [*lines, "No retrain ran in this night.", ""]
    versions = ", ".join(f"{k}={v}" for k, v in sorted(night.dataset_versions.items())) or "-"
    lines += [f"Profile `{night.profile}`, {night.status}, in {_seconds(night.seconds)}.", ""]
    lines += [f"Dataset versions: {versions}", ""]
    if not night.tasks:
        return lines
    lines += ["| task | model | version | training time |", "|---|---|---|---:|"]
    for t in night.tasks:
        lines.append(f"| {t.task} | {t.model} | {t.version or '-'} | {_seconds(t.train_seconds)} |")
    return [*lines, ""]


def _gate_section(night: NightlySummary | None) -> list[str]:
    lines = ["## Gate decisions", ""]
    if night is None or not night.tasks:
        return [*lines, "No gate ran in this night.", ""]
    lines += ["| model | version | decision | canaries | precision | reason |", "|---|---|---|---|---|---|"]
    for t in night.tasks:
        canaries = f"{t.canaries - t.canaries_failed}/{t.canaries} passed" if t.canaries else "none"
        lines.append(
            f"| {t.model} | {t.version or '-'} | **{t.decision or '-'}** | {canaries} | "
            f"{_cell(t.precision or '-')} | {_cell(t.reason or '')} |"
        )
    lines.append("")
    for t in night.tasks:
        if t.gate_report:  # the gate's own report: metrics, canaries, precision (as the registry keeps it)
            lines += [t.gate_report.replace("\n### ", "\n#### ").replace("### ", "#### ", 1).rstrip(), ""]
    return lines


def _scoring_section(report: NightReport) -> list[str]:
    lines = ["## Scored", ""]
    if not report.scoring:
        where = f" (output folder {report.scoring_out})" if report.scoring_out else ""
        return [*lines, f"{NO_SCORING[0].upper()}{NO_SCORING[1:]}{where}.", ""]
    lines += [
        "| scoring run | model | version | files scored | quarantined | rows scored | rejected | truncated "
        "| pairs/s | alarms |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report.scoring:
        lines.append(
            f"| `{r.run_id}` | {r.model} | {r.version} | {num(r.files_scored)} | "
            f"{num(r.files_quarantined)} | {num(r.rows_scored)} | {num(r.rows_rejected)} | "
            f"{num(r.rows_truncated)} | {num(r.pairs_per_s)} | {r.alarms} |"
        )
    return [*lines, ""]


def _drift_section(report: NightReport, plots: dict[str, str]) -> list[str]:
    lines = ["## Drift", ""]
    if not report.scoring:
        return [*lines, f"No drift table: {NO_SCORING}.", ""]
    for r in report.scoring:
        lines += [f"### `{r.run_id}`: {r.model} v{r.version}, {r.alarms} alarm(s)", ""]
        if not r.drift:
            lines += ["Not monitored (no monitor.json for this run).", ""]
            continue
        lines += ["| statistic | test | value | threshold | against | alarm |", "|---|---|---:|---:|---|---|"]
        for row in sorted(r.drift, key=lambda row: not row.alarm):  # alarms first
            against = f"{row.against} ({row.note})" if row.note else row.against
            lines.append(
                f"| {_cell(row.statistic)} | {_cell(row.test)} | {num(row.value)} | "
                f"{num(row.threshold)} | {_cell(against)} | {'**ALARM**' if row.alarm else 'ok'} |"
            )
        lines.append("")
        for plot in r.plots:
            lines += [f"![{Path(plot).stem}]({plots.get(plot, plot)})", ""]
        if r.monitor:
            lines += [f"Monitor: `{r.monitor}`", ""]
    return lines


def _traffic_section(night: NightlySummary | None) -> list[str]:
    """ "Accuracy on your traffic": the gate's measurements on reviewed traffic (`TaskOutcome.traffic`)."""
    lines = ["## Accuracy on your traffic", ""]
    rows: list[tuple[TaskOutcome, TrafficAccuracy]] = [
        (t, a) for t in (night.tasks if night is not None else []) for a in t.traffic
    ]
    if not rows:
        return [
            *lines,
            "Not measured tonight: no task evaluates on reviewed traffic (a `traffic` split of reviewed "
            "pairs).",
            "",
        ]
    lines += [
        "| task | model | split | metric | value | interval | reviewed pairs |",
        "|---|---|---|---|---:|---|---:|",
    ]
    for t, a in rows:
        interval = f"[{num(a.low)}, {num(a.high)}]" if a.low is not None and a.high is not None else "-"
        model = a.model or f"{t.model} v{t.version or '-'}"
        lines.append(
            f"| {t.task} | {model} | {a.split} | {a.metric} | {num(a.value)} | {interval} | {a.n_reviewed} |"
        )
    return [*lines, ""]


# -- where reports live -------------------------------------------------------------------------------


def reports_root(home: str | Path) -> Path:
    return Path(home) / REPORTS_DIR


def report_name(started: datetime, run_id: str | None) -> str:
    """`<date>-<first 8 of the flow run id>`, or `<date>-local-HHMMSS` for an in-process run."""
    started = started.astimezone(UTC)
    tail = run_id.removeprefix("prefect-")[:8] if run_id else f"local-{started:%H%M%S}"
    return f"{started:%Y-%m-%d}-{tail}"


def scoring_output(home: str | Path, explicit: str | Path | None = None) -> Path:
    """The folder the nightly scoring writes to: `explicit`, else `$SIMPAIR_SCORED`, else
    `<home>/scoring` (the `nightly-score` deployment's own defaults)."""
    return Path(explicit or os.environ.get(SCORED_ENV) or Path(home) / "scoring")


def recent_scoring_runs(out: str | Path, since: datetime) -> list[ScoredRun]:
    """Every run monitored in `out` whose `monitor.json` was written at or after `since`, oldest first."""
    found = []
    for path in (Path(out) / MONITOR_DIR).glob(f"*/*/*/{MONITOR_FILE}"):
        if datetime.fromtimestamp(path.stat().st_mtime, UTC) >= since:
            found.append((path.stat().st_mtime, path))
    return [ScoredRun.from_monitor(path) for _, path in sorted(found)]


def latest_report(home: str | Path, now: datetime | None = None) -> NightReport | None:
    """The newest report begun within `JOIN_WINDOW` before `now`, or None."""
    now = now or datetime.now(UTC)
    best: NightReport | None = None
    for path in reports_root(home).glob(f"*/{DATA}"):
        try:
            report = NightReport.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a damaged or foreign file: the run begins a report of its own
        started = datetime.fromisoformat(report.started_at)
        if now - JOIN_WINDOW <= started <= now and (best is None or report.started_at > best.started_at):
            best = report
    return best


class WrittenReport(BaseModel):
    """Where a report was written and what it says (the flows publish `markdown` as an artifact)."""

    path: str
    markdown: str
    alarms: int = 0


def write_report(home: str | Path, report: NightReport) -> WrittenReport:
    """Write `night.md` and `night.json` under `<home>/reports/<name>/`, the plots copied beside them
    (links relative to the page, so the folder can be moved or served as it is)."""
    folder = reports_root(home) / report.name
    links: dict[str, str] = {}
    for run in report.scoring:
        beside = f"{PLOTS_DIR}/{run.model}-v{run.version}-{run.run_id.removeprefix('prefect-')[:8]}"
        for plot in run.plots:
            source = Path(plot)
            link = f"{beside}/{source.name}"
            if source.is_file():
                (folder / link).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, folder / link)
                links[plot] = link
    markdown = report.to_markdown(links)
    atomic_write_text(folder / DATA, report.model_dump_json(indent=2) + "\n")
    page = atomic_write_text(folder / PAGE, markdown)
    return WrittenReport(path=str(page), markdown=markdown, alarms=report.alarms)


def _lock(home: str | Path) -> filelock.FileLock:
    """One writer at a time (a night ending while a cron scoring run adds itself)."""
    root = reports_root(home)
    root.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(root / ".lock"), timeout=120)


@step("publish-night-report")
def publish_night_report(
    home: Path, summary: NightlySummary, scoring_out: str | None = None, started_at: str | None = None
) -> WrittenReport:
    """Write the night's report at its end: its summary and the scoring runs of the 24 h before it in
    the scoring output folder (`scoring_output`), or "no scoring in this night". `started_at` (UTC ISO)
    names the report's date; default now."""
    started = datetime.fromisoformat(started_at) if started_at else datetime.now(UTC)
    out = scoring_output(home, scoring_out)
    report = NightReport(
        name=report_name(started, summary.flow_run_id),
        started_at=started.astimezone(UTC).isoformat(timespec="seconds"),
        night=summary,
        scoring=recent_scoring_runs(out, datetime.now(UTC) - JOIN_WINDOW) if out.is_dir() else [],
        scoring_out=str(out),
    )
    with _lock(home):
        return write_report(home, report)


@step("publish-night-report-scoring")
def add_scoring_run(home: Path, run: ScoredRun) -> WrittenReport:
    """Add one scoring run (`ScoredRun.from_summary`) to the newest report begun in the last 24 h, or
    begin a report of its own (no retrain in it); returns where it was written."""
    with _lock(home):
        report = latest_report(home)
        if report is None:
            now = datetime.now(UTC)
            report = NightReport(
                name=report_name(now, run.run_id), started_at=now.isoformat(timespec="seconds")
            )
        return write_report(home, report.with_run(run))


@contextmanager
def page_on_failure(runner: StageRunner, home: Path, profile: str, run_id: str) -> Iterator[str]:
    """Around a night's body (inside its lock): yields when it began (UTC ISO, the page's date); when
    the body raises, the page is written with status `failed` and the error before the error goes on.
    A page that cannot be written is reported in one line and never hides the night's own error."""
    begun, started = datetime.now(UTC).isoformat(timespec="seconds"), time.monotonic()
    try:
        yield begun
    except Exception as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        failed = NightlySummary(
            profile=profile, status="failed", message=message, seconds=time.monotonic() - started,
            flow_run_id=run_id,
        )  # fmt: skip
        try:
            written = runner.run(publish_night_report, home=home, summary=failed, started_at=begun)
            print(f"nightly: report {written.path}")
        except Exception as unwritten:  # noqa: BLE001 - the night's own error is the one to raise
            print(
                f"nightly: report of the failed night not written ({type(unwritten).__name__}: {unwritten})"
            )
        raise
