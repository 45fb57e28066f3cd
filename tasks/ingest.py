"""Prefect tasks for ingest: each step of `simpair.ingest.pipeline.run_ingest`, built from its
declaration (`simpair.tasks.stages.as_task`), so every task takes the same arguments as its step.

The `ingest` flow runs the ingest DAG with these tasks. Caching is off on purpose: ingest is already
idempotent through its content-addressed versions, and a Prefect cache keyed on arguments would skip
a run whose *files* changed under the same paths.
"""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_markdown_artifact
from prefect.states import State

from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.parse import FileJob, FileResult, parse_file
from simpair.ingest.pipeline import finish_ingest, load_contracts, safe_leakage
from simpair.ingest.report import IngestFailedError, IngestReport, summary_markdown
from simpair.tasks.stages import as_task

# valid contracts, plus a failed report per unusable contract file (they do not stop the others)
load_contracts_task = as_task(load_contracts)
# one source file into its parts under the version's work folder (nothing else is written)
parse_file_task = as_task(parse_file)


def parse_files_as_tasks(jobs: list[FileJob]) -> list[FileResult]:
    """The files of a source as parallel `parse-file` task runs on the flow's task runner.

    Every run is awaited before an error is raised, so no task still writes into the work folder when
    the source cleans it up; the error raised is the first failing file's, in file order, as the
    one-file-after-another path would have raised it.
    """
    futures = parse_file_task.map(jobs)
    futures.wait()
    return [future.result() for future in futures]


def _parse_as_tasks() -> dict[str, Any]:
    return {"parse_files": parse_files_as_tasks}


# One source; a bad file comes back as status "failed" rather than raising, so siblings finish. The
# source's lock, version check and final write stay in this task; its files are parsed as `parse-file`
# tasks, so a Dask task runner parses the files of a large source on many workers.
ingest_source_task = as_task(ingest_dataset, adds=_parse_as_tasks)
# the train/test overlap report over every current dataset (a failure is reported, not raised)
leakage_task = as_task(safe_leakage)


def _publish_report(report: IngestReport, _: dict[str, Any]) -> None:
    create_markdown_artifact(
        markdown=summary_markdown(report), key="ingest-summary", description=report.headline()
    )


# the run's report, also published as a markdown artifact (key `ingest-summary`: one list in the UI)
publish_summary_task = as_task(finish_ingest, then=_publish_report)


def report_from_state(state: State) -> IngestReport:
    """The report of a finished `ingest` flow run, whether it Completed or Failed because a source failed."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, IngestFailedError):
        return result.report
    if isinstance(result, BaseException):
        raise result
    return result
