"""CLI command `simpair monitor`: the drift table and plots of a scoring output folder's runs.

Reads the traffic profiles every scoring run stored under `<out>/_monitor/` (docs/monitoring.md),
compares the latest run (of `--model`, when given) with its version's reference and the nights
before it, prints the table, writes `monitor.json` and the PNGs into that run's folder, and lists
the other runs since `--since` with their alarm counts. The reference is the copy stored beside the
traffic; without one it is fetched from the registry by the version (`--home`), and without either
the table holds the history and health rows only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    StrictOption,
    print_markdown,
    report_console,
    write_json,
)
from simpair.cli.failures import fail, finish


def _registry_reference(home: Path | None, model: str, version: str, dest: Path) -> Any:
    """The version's reference from the registry (None when there is no registry or no reference)."""
    try:
        from simpair.monitoring.profile import Profile
        from simpair.registry.monitoring import download_reference
        from simpair.runtime.model_ref import resolve_model_ref
        from simpair.settings import home_dir

        where = home_dir(home, create=False)
        ref = resolve_model_ref(f"{model}/{version}", where)
        if not ref.run_id:
            return None
        folder = download_reference(where, ref.run_id, dest)
        return Profile.load(folder) if folder is not None else None
    except Exception:  # no registry here, or the version is gone: the table says "no reference"
        return None


def monitor(
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="DIR", help="A scoring output folder (the one given to `simpair score --out`)."
        ),
    ],
    since: Annotated[
        str,
        typer.Option(help="Also list the runs of the last period (30d, 12h, 2w), each with its alarm count."),
    ] = "30d",
    model: Annotated[
        str | None,
        typer.Option(
            help="Only this model's runs (its registered name, or the folder name of a model folder)."
        ),
    ] = None,
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            help="Nightly profile whose monitor: thresholds apply: default | smoke | path to YAML.",
        ),
    ] = "default",
    home: HomeOption = None,
    json_out: JsonOutOption = None,
    strict: StrictOption = False,
) -> None:
    """Drift of the latest scoring run against its model version's reference and the last nights."""
    from simpair.monitoring import store
    from simpair.monitoring.drift import REPORT_FILE, DriftReport, compare, write_report
    from simpair.monitoring.profile import Profile
    from simpair.nightly.profile import load_profile

    out_console = report_console(json_out)
    try:
        window = store.parse_since(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from exc
    if not out.is_dir():
        fail(f"--out {out}: no such folder")
    stored = store.runs(out, model)
    if not stored:
        whose = f" of model {model}" if model else ""
        fail(f"no traffic profiles{whose} under {out / store.MONITOR_DIR}: score with monitoring on first")
    latest = stored[-1]
    try:
        traffic = Profile.load(latest.folder)
        reference = store.load_reference(out, latest.model, latest.version)
    except ValueError as exc:
        fail(str(exc), exc)
    if reference is None:
        reference = _registry_reference(
            home, latest.model, latest.version, latest.folder.parent / store.REFERENCE
        )
    try:  # the thresholds the night's own scoring runs use, so the table agrees with their alarms
        policy = load_profile(profile).monitor
    except (OSError, ValueError) as exc:
        fail(f"--profile {profile}: {exc}", exc)
    try:  # a read-only --out or a damaged past night: one line naming it
        nights = store.history(out, latest.model, latest.version, window)
        report = compare(traffic, reference, nights, policy)
        paths = write_report(report, traffic, reference, nights, latest.folder)
    except (OSError, ValueError) as exc:
        fail(str(exc), exc)
    print_markdown(out_console, report.to_markdown())
    if reference is None:
        out_console.print(
            "no reference profile for this version: history and health rows only", soft_wrap=True
        )
    out_console.print(escape(f"report and plots: {', '.join(str(p) for p in paths)}"), soft_wrap=True)

    cutoff = traffic.created - window
    earlier = [r for r in stored[:-1] if r.created >= cutoff]
    listed = []
    for run in earlier:
        saved = run.folder / REPORT_FILE
        try:
            alarms = len(DriftReport.model_validate_json(saved.read_text(encoding="utf-8")).alarms)
        except (OSError, ValueError):
            alarms = None  # scored without a report: counted when that run is the latest
        listed.append({"run_id": run.run_id, "model": run.model, "version": run.version,
                       "created": run.created.isoformat(), "alarms": alarms})  # fmt: skip
    if listed:
        out_console.print(f"runs since {since} before this one:", soft_wrap=True)
        for row in listed:
            said = "no report" if row["alarms"] is None else f"{row['alarms']} alarm(s)"
            out_console.print(
                escape(f"  {row['created'][:19]}  {row['model']} v{row['version']}  {row['run_id']}  {said}"),
                soft_wrap=True,
            )
    summary = {"alarms": len(report.alarms), "files": [str(p) for p in paths], "earlier_runs": listed}
    write_json({**json.loads(report.to_json()), **summary}, json_out)
    finish(strict, len(report.alarms), f"{len(report.alarms)} drift or health alarm(s)")


def register(app: typer.Typer) -> None:
    """Add `simpair monitor` to the top-level app."""
    app.command("monitor")(monitor)
