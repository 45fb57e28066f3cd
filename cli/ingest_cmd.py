"""CLI command `simpair ingest`: raw sources into versioned, validated Parquet.

The flow import is deferred into the command so `simpair --help` and `--no-prefect` runs never pay
for importing Prefect (and `simpair/` itself stays Prefect-free at import time).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from simpair.cli.common import HomeOption, NoPrefectOption, SourcesOption, freeze_imports
from simpair.cli.failures import debug_enabled, quiet_prefect_console

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
    report_json: Annotated[
        Path | None, typer.Option("--report-json", help="Also write the run report as JSON to this file.")
    ] = None,
) -> None:
    """Ingest raw sources (TSV/CSV, Parquet, JSON Lines; .gz/.zst) into versioned, validated Parquet.

    Lossless: every record is a clean row or a quarantined row with its reason.

    Exits 1 if any source, contract or the leakage report failed (one `error:` line each on stderr,
    naming the file); the other sources are still ingested.
    """
    from simpair.ingest.report import summary_renderable

    report = _run(sources, home, contracts, no_prefect)
    Console(width=max(Console().width, 160)).print(summary_renderable(report))
    if report_json is not None:
        report_json.write_text(json.dumps(report.model_dump(), indent=2) + "\n")
    for line in report.failure_lines():
        typer.echo(f"error: {line}", err=True)
    if not report.ok:
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Add `simpair ingest` to the top-level app."""
    app.command("ingest")(ingest)
