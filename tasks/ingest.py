"""Prefect tasks for ingest: each wraps one stage of `simpair.ingest.pipeline.run_ingest`, nothing more.

`simpair.tasks.stages.PrefectStages` runs the ingest DAG with each stage as its task here; every task
takes the same keyword arguments as the stage it wraps. Caching is off on purpose: ingest is already
idempotent through its content-addressed versions, and a Prefect cache keyed on arguments would skip
a run whose *files* changed under the same paths.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import State

from simpair.contracts import Contract
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.parse import FileJob, FileResult, parse_file
from simpair.ingest.pipeline import finish_ingest, load_contracts, safe_leakage
from simpair.ingest.report import (
    DatasetReport,
    IngestFailedError,
    IngestReport,
    LeakageReport,
    summary_markdown,
)


@task(name="load-contracts", cache_policy=NO_CACHE)
def load_contracts_task(contracts: Path) -> tuple[list[Contract], list[DatasetReport]]:
    """Valid contracts, plus a failed report per unusable contract file (they do not stop the others)."""
    return load_contracts(contracts)


@task(name="parse-file", task_run_name="parse-{job.contract.dataset}-{job.relative}", cache_policy=NO_CACHE)
def parse_file_task(job: FileJob) -> FileResult:
    """One source file into its parts under the version's work folder (nothing else is written)."""
    return parse_file(job)


def parse_files_as_tasks(jobs: list[FileJob]) -> list[FileResult]:
    """The files of a source as parallel `parse-file` task runs on the flow's task runner.

    Every run is awaited before an error is raised, so no task still writes into the work folder when
    the source cleans it up; the error raised is the first failing file's, in file order, as the
    one-file-after-another path would have raised it.
    """
    futures = parse_file_task.map(jobs)
    futures.wait()
    return [future.result() for future in futures]


@task(name="ingest-source", task_run_name="ingest-{contract.dataset}", cache_policy=NO_CACHE)
def ingest_source_task(contract: Contract, sources: str | Path, home: Path) -> DatasetReport:
    """One source; a bad file comes back as status "failed" rather than raising, so siblings finish.

    The source's lock, version check and final write stay in this task; its files are parsed as
    `parse-file` tasks, so a Dask task runner parses the files of a large source on many workers.
    """
    return ingest_dataset(contract, sources, home, parse_files=parse_files_as_tasks)


@task(name="update-leakage", cache_policy=NO_CACHE)
def leakage_task(home: Path) -> LeakageReport:
    """The train/test overlap report over every current dataset (a failure is reported, not raised)."""
    return safe_leakage(home)


@task(name="publish-ingest-summary", cache_policy=NO_CACHE)
def publish_summary_task(datasets: list[DatasetReport], leakage: LeakageReport) -> IngestReport:
    """The run's report, also published as a markdown artifact (key `ingest-summary`: one list in the UI)."""
    report = finish_ingest(datasets, leakage)
    create_markdown_artifact(
        markdown=summary_markdown(report), key="ingest-summary", description=report.headline()
    )
    return report


def report_from_state(state: State) -> IngestReport:
    """The report of a finished `ingest` flow run, whether it Completed or Failed because a source failed."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, IngestFailedError):
        return result.report
    if isinstance(result, BaseException):
        raise result
    return result
