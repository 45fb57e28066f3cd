"""The `ingest` flow: raw TSV/CSV sources -> versioned Parquet + leakage report + summary artifact.

Sources run as parallel mapped tasks so one broken file fails only its source; inside a source each
file is parsed by its own `parse-file` task on the flow's task runner (a `DaskTaskRunner` parses many
files at once). The flow run ends Failed (after publishing the summary) when any source failed, so a
nightly schedule alerts.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, unmapped
from prefect.states import State

from simpair import settings
from simpair.ingest.report import IngestReport
from simpair.tasks.ingest import ingest_source_task, leakage_task, load_contracts_task, publish_summary_task


class IngestFailedError(RuntimeError):
    """Raised at the end of a run in which at least one source failed; carries the full report."""

    def __init__(self, report: IngestReport) -> None:
        super().__init__(report.headline() + ": " + "; ".join(d.error or "" for d in report.failed))
        self.report = report

    def __reduce__(self) -> tuple[type, tuple[IngestReport]]:
        # picklable for Prefect result persistence (the default reduce would pass the message as report)
        return (IngestFailedError, (self.report,))


@flow(name="ingest", log_prints=True)
def ingest_flow(
    sources: str | None = None, home: str | None = None, contracts: str | None = None
) -> IngestReport:
    """Ingest every dataset contract; see docs/ingest.md."""
    sources_dir = settings.sources_dir(sources)
    home_dir = settings.home_dir(home)
    contracts_dir = settings.contracts_dir(contracts)
    good, bad = load_contracts_task(contracts_dir)
    futures = ingest_source_task.map(good, unmapped(sources_dir), unmapped(home_dir))
    datasets = sorted([*bad, *futures.result()], key=lambda r: r.dataset)
    leakage = leakage_task(home_dir, wait_for=futures)
    report = IngestReport(datasets=datasets, leakage=leakage)
    publish_summary_task(report)
    print(report.headline())
    if not report.ok:
        raise IngestFailedError(report)
    return report


def _as_path(value: str | Path | None) -> str | None:
    return None if value is None else str(value)


def report_from_state(state: State) -> IngestReport:
    """The report of a finished flow run, whether it Completed or Failed because a source failed."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, IngestFailedError):
        return result.report
    if isinstance(result, BaseException):
        raise result
    return result


def run(
    sources: str | Path | None = None, home: str | Path | None = None, contracts: str | Path | None = None
) -> IngestReport:
    """Run the flow and return its report whether it succeeded or failed (for the CLI and tests)."""
    return report_from_state(
        ingest_flow(_as_path(sources), _as_path(home), _as_path(contracts), return_state=True)
    )


if __name__ == "__main__":
    ingest_flow()
