"""CLI command `simpair nightly`: ingest -> pre-tokenize -> train -> evaluate -> register -> gate.

The nightly flow (and so Prefect) is imported inside the command only, so `simpair --help` stays fast
and `simpair/` stays Prefect-free at import time.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    NoPrefectOption,
    ProfileOption,
    SourcesOption,
    json_owns_stdout,
    print_markdown,
    report_console,
    write_json,
)
from simpair.cli.failures import fail, quiet_prefect_console


def nightly(
    profile: ProfileOption = "default",
    force: Annotated[bool, typer.Option("--force", help="Retrain even if no source changed.")] = False,
    home: HomeOption = None,
    sources: SourcesOption = None,
    wait: Annotated[
        float | None,
        typer.Option(help="Seconds to wait for another nightly run to finish (default: the profile's)."),
    ] = None,
    no_prefect: NoPrefectOption = False,
    json_out: JsonOutOption = None,
) -> None:
    """Ingest -> pre-tokenize -> train -> evaluate -> register -> gate, as one Prefect flow run."""
    from simpair import settings  # noqa: PLC0415
    from simpair.nightly.summary import NightlyFailed  # noqa: PLC0415

    settings.sources_dir(sources)  # every night ingests first: no sources fails now, before torch or Prefect
    if no_prefect:
        from simpair.nightly.night import night_in_process as run  # noqa: PLC0415
    else:
        # Prefect's temporary API migrates SQLite on first start: ~17 s idle, over its 20 s default when
        # the machine is busy ("Timed out while attempting to connect to ephemeral Prefect API server").
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
        from simpair.flows.launch import nightly as run  # noqa: PLC0415 - Prefect only here

        quiet_prefect_console()

    try:
        summary = run(profile=profile, force=force, home=home, sources=sources, wait_seconds=wait)
    except NightlyFailed as exc:
        fail(str(exc), exc)
    print_markdown(report_console(json_out), summary.to_markdown())
    write_json(summary.model_dump(mode="json"), json_out)


def register(app: typer.Typer) -> None:
    """Add `simpair nightly` to the top-level app."""
    app.command("nightly")(json_owns_stdout(nightly))
