"""The Prefect `ingest` flow on a real (temporary) Prefect API: tasks run, the summary is published.

Marked integration: it needs the session's Prefect server (about 20 s to start the first time).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterId,
    TaskRunFilter,
    TaskRunFilterName,
)
from prefect.client.schemas.sorting import ArtifactSort, TaskRunSort

from simpair.catalog import Catalog
from simpair.flows.ingest import ingest_flow
from simpair.tasks.ingest import report_from_state

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Prefect 3.8's client sends None for omitted filters, sort and offset, which its own API rejects with 422,
# so every query below passes them explicitly.


def _summary(flow_run_id: UUID, within: float = 30.0) -> str:
    """Markdown of the ingest-summary artifact that this flow run's publishing task created (asked again
    for up to `within` seconds: once, with 3 test workers on 2 cores, the first query came back empty)."""
    deadline = time.monotonic() + within
    while True:
        with get_client(sync_client=True) as client:
            artifacts = client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["ingest-summary"])),
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                task_run_filter=TaskRunFilter(),
                sort=ArtifactSort.CREATED_DESC,
                limit=1,
                offset=0,
            )
        if artifacts or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert artifacts, "no ingest-summary artifact was published by this flow run"
    assert artifacts[0].task_run_id is not None  # made inside the publish task, not by the flow body
    return str(artifacts[0].data)


def _parse_task_runs(flow_run_id: UUID, expected: int) -> list[str]:
    """Names of this flow run's `parse-file` task runs (one per source file). Task runs reach the API
    as events written behind the flow's back, so the last ones may land after the flow returns: read
    again until `expected` are there (or 30 s have passed)."""
    deadline = time.monotonic() + 30
    while True:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="parse-")),
                sort=TaskRunSort.EXPECTED_START_TIME_ASC,
                limit=100,
                offset=0,
            )
        if len(runs) >= expected or time.monotonic() > deadline:
            return sorted(r.name for r in runs)
        time.sleep(0.5)


def test_flow_ingests_real_data_and_publishes_summary(
    prefect_api: None, shared_data: Path, home: Path, tmp_path: Path
) -> None:
    contracts = str(REPO / "data_contracts")
    state = ingest_flow(str(shared_data), str(home), contracts, return_state=True)
    assert state.is_completed()
    report = report_from_state(state)
    assert report.ok and {d.status for d in report.datasets} == {"ingested"}
    assert Catalog(home).read_split("stsb", "dev").height == 1497  # 1,500 less 2 exact repeats, 1 swapped
    flow_run_id = state.state_details.flow_run_id
    # each source file was parsed by its own task run, on the flow's task runner
    assert _parse_task_runs(flow_run_id, expected=5) == [
        "parse-msrp-msrp/msr_paraphrase_test.txt",
        "parse-msrp-msrp/msr_paraphrase_train.txt",
        "parse-stsb-stsb/sts-dev.csv",
        "parse-stsb-stsb/sts-test.csv",
        "parse-stsb-stsb/sts-train.csv",
    ]
    summary = _summary(flow_run_id)
    assert "| msrp | train (train) |" in summary and "| 4076 | 4076 | 0 |" in summary
    assert "| msrp | test | stsb | train | 498 |" in summary

    # a second flow run on the same home does no work and says so
    again = ingest_flow(str(shared_data), str(home), contracts, return_state=True)
    assert {d.status for d in report_from_state(again).datasets} == {"unchanged"}
    assert "nothing changed" in _summary(again.state_details.flow_run_id)


def test_flow_with_a_broken_source_fails_after_ingesting_the_others(
    prefect_api: None, shared_data: Path, home: Path, tmp_path: Path
) -> None:
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    shutil.copy(REPO / "data_contracts" / "msrp.yaml", contracts)
    stsb = (REPO / "data_contracts" / "stsb.yaml").read_text()
    (contracts / "stsb.yaml").write_text(stsb.replace("stsb/sts-dev.csv", "stsb/sts-devv.csv"))

    state = ingest_flow(str(shared_data), str(home), str(contracts), return_state=True)

    assert state.is_failed()
    report = report_from_state(state)
    assert [d.dataset for d in report.failed] == ["stsb"]
    assert Catalog(home).datasets() == ["msrp"]
    summary = _summary(state.state_details.flow_run_id)
    assert "FAILED" in summary and "sts-devv.csv" in summary
