"""The `ingest` flow: raw TSV/CSV sources -> versioned Parquet + leakage report + summary artifact.

The DAG is `simpair.ingest.pipeline.run_ingest`, the same one `simpair ingest --no-prefect` runs in
process; this flow runs each of its steps as its Prefect task (`simpair.tasks.ingest`, built from
the step's declaration), listed below in the DAG's order:

    load-contracts -> ingest-source (mapped over the contracts) -> update-leakage -> publish-ingest-summary

Sources run as parallel mapped tasks so one broken file fails only its source; inside a source each
file is parsed by its own `parse-file` task on the flow's task runner (a `DaskTaskRunner` parses many
files at once). The flow run ends Failed (after publishing the summary) when any source failed, so a
nightly schedule alerts. `simpair.flows.launch.ingest` runs it and returns the report either way.
"""

from __future__ import annotations

from prefect import flow

from simpair.ingest.pipeline import run_ingest
from simpair.ingest.report import IngestFailedError, IngestReport
from simpair.tasks.ingest import ingest_source_task, leakage_task, load_contracts_task, publish_summary_task
from simpair.tasks.stages import PrefectStages

# the ingest DAG's steps, each as its Prefect task, in the order `run_ingest` runs them
STEPS = PrefectStages(
    [
        load_contracts_task,
        ingest_source_task,  # mapped over the contracts; parses each file as a task
        leakage_task,  # once every source is done
        publish_summary_task,  # the report + the `ingest-summary` artifact
    ]
)


@flow(name="ingest", log_prints=True)
def ingest_flow(
    sources: str | None = None, home: str | None = None, contracts: str | None = None
) -> IngestReport:
    """Ingest every dataset contract; see docs/ingest.md."""
    report = run_ingest(sources, home, contracts, runner=STEPS)
    print(report.headline())
    if not report.ok:
        raise IngestFailedError(report)
    return report


if __name__ == "__main__":
    ingest_flow()
