"""CLI command `simpair ingest`: raw sources into versioned, validated Parquet.

The flow import is deferred into the command so `simpair --help` and `--no-prefect` runs never pay
for importing Prefect (and `simpair/` itself stays Prefect-free at import time).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    NoPrefectOption,
    SourcesOption,
    StrictOption,
    freeze_imports,
    json_owns_stdout,
    report_console,
    write_json,
)
from simpair.cli.failures import EXIT_FAILED, debug_enabled, finish, quiet_prefect_console

if TYPE_CHECKING:
    from simpair.ingest.report import IngestReport


@contextmanager
def _report_owns_failures() -> Iterator[None]:
    """The domain's own failure logs stay off the console: the report's lines say the same, once each.

    With --debug they are left on, tracebacks included.
    """
    if debug_enabled():
        yield
        return
    logger = logging.getLogger("simpair.ingest")
    before, silent = logger.propagate, logging.NullHandler()  # NullHandler: no "last resort" printing
    logger.propagate = False
    logger.addHandler(silent)
    try:
        yield
    finally:
        logger.removeHandler(silent)
        logger.propagate = before


def _run(sources: str | None, home: Path | None, contracts: Path | None, no_prefect: bool) -> IngestReport:
    with _report_owns_failures():
        if no_prefect:
            from simpair.ingest import run_ingest

            freeze_imports()
            return run_ingest(sources, home, contracts)
        from simpair.flows.launch import ingest as run_flow  # noqa: PLC0415 - Prefect only when wanted

        quiet_prefect_console()
        return run_flow(sources, home, contracts)


def ingest(
    sources: SourcesOption = None,
    home: HomeOption = None,
    contracts: Annotated[
        Path | None,
        typer.Option(
            help="Folder of data contracts (YAML). Default: $SIMPAIR_CONTRACTS, else data_contracts/."
        ),
    ] = None,
    no_prefect: NoPrefectOption = False,
    json_out: JsonOutOption = None,
    report_json: Annotated[
        str | None, typer.Option("--report-json", hidden=True, help="Deprecated spelling of --json PATH.")
    ] = None,
    strict: StrictOption = False,
) -> None:
    """Ingest raw sources (TSV/CSV, Parquet, JSON Lines; .gz/.zst) into versioned, validated Parquet.

    Lossless: every record is a clean row or a quarantined row with its reason.

    Exits 1 if any source, contract or the leakage report failed (one `error:` line each on stderr,
    naming the file); the other sources are still ingested. With --strict, exits 3 when the sources
    were ingested but some of their rows are quarantined.
    """
    from simpair.ingest.report import summary_renderable

    if report_json is not None and json_out is not None:
        raise typer.BadParameter("give --json only (--report-json is its old name)", param_hint="--json")
    json_out = json_out if json_out is not None else report_json
    report = _run(sources, home, contracts, no_prefect)
    report_console(json_out).print(summary_renderable(report))
    write_json(report.model_dump(mode="json"), json_out)
    for line in report.failure_lines():
        typer.echo(f"error: {line}", err=True)
    if not report.ok:
        raise typer.Exit(code=EXIT_FAILED)
    quarantined = sum(s.quarantined for d in report.datasets for s in d.splits) + sum(
        d.unassigned for d in report.datasets
    )
    finish(strict, quarantined, f"{quarantined} rows quarantined (reasons in the quarantine files)")


def register(app: typer.Typer) -> None:
    """Add `simpair ingest` to the top-level app."""
    app.command("ingest")(json_owns_stdout(ingest))
