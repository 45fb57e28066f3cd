"""The `ingest` flow: raw TSV/CSV sources -> versioned Parquet + leakage report + summary artifact.

The DAG is `simpair.ingest.pipeline.run_ingest`, the same one `simpair ingest --no-prefect` runs in
process; this flow runs each of its stages as the Prefect task wired below:

    load-contracts -> ingest-source (mapped over the contracts) -> update-leakage -> publish-ingest-summary

Sources run as parallel mapped tasks so one broken file fails only its source; inside a source each
file is parsed by its own `parse-file` task on the flow's task runner (a `DaskTaskRunner` parses many
files at once). The flow run ends Failed (after publishing the summary) when any source failed, so a
nightly schedule alerts. `simpair.flows.launch.ingest` runs it and returns the report either way.
"""

from __future__ import annotations

from prefect import flow

from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.pipeline import finish_ingest, load_contracts, run_ingest, safe_leakage
from simpair.ingest.report import IngestFailedError, IngestReport
from simpair.tasks.ingest import ingest_source_task, leakage_task, load_contracts_task, publish_summary_task
from simpair.tasks.stages import PrefectStages

# stage of the ingest DAG -> the Prefect task that runs it in this flow
AS_TASKS = PrefectStages(
    runs={
        load_contracts: load_contracts_task,
        ingest_dataset: ingest_source_task,  # mapped over the contracts; parses each file as a task
        safe_leakage: leakage_task,  # once every source is done
        finish_ingest: publish_summary_task,  # the report + the `ingest-summary` artifact
    }
)


@flow(name="ingest", log_prints=True)
def ingest_flow(
    sources: str | None = None, home: str | None = None, contracts: str | None = None
) -> IngestReport:
    """Ingest every dataset contract; see docs/ingest.md."""
    report = run_ingest(sources, home, contracts, runner=AS_TASKS)
    print(report.headline())
    if not report.ok:
        raise IngestFailedError(report)
    return report


if __name__ == "__main__":
    ingest_flow()
