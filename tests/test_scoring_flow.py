"""The `nightly-score` flow on real Prefect: default task runner vs a prefect-dask LocalCluster.

Both runs score the same inbox (good batches with bad rows, a bad file) into separate outputs; the
outputs must be identical row by row apart from the run id and timestamp, and the summary must be
published as a Prefect artifact. Both ask for bf16: the flow process resolves the precision and the
Dask worker processes receive it as a task argument (a bf16 request scores in fp32 where bf16 is not
native, and says so in every row).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import test_scoring_support as support
from test_scoring_support import (
    assert_exactly_once,
    assert_same_outputs,
    make_pairs,
    outputs_by_name,
    write_batch,
)

from simpair.flows.launch import score as run_flow
from simpair.models import device as devices

BF16_RUNS_AS = "bf16" if devices.native_bf16(devices.pick_device("auto")) else "fp32"

tiny_cross = support.tiny_cross
pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _inbox(root: Path) -> dict[str, pa.Table]:
    tables = {
        "a.parquet": make_pairs(2000, seed=30, prefix="a"),
        "b.parquet": make_pairs(900, seed=31, prefix="b"),
    }
    text_b = tables["b.parquet"].column("text_b").to_pylist()
    text_b[10] = None
    tables["b.parquet"] = tables["b.parquet"].set_column(2, "text_b", pa.array(text_b, pa.string()))
    for name, table in tables.items():
        write_batch(table, root / name, row_group_size=333)
    (root / "c-broken.parquet").write_bytes(b"PAR1 truncated upload")
    return tables


def test_flow_on_dask_local_cluster_matches_default_runner(
    prefect_api: None, tmp_path: Path, tiny_cross: Path
) -> None:
    inbox = tmp_path / "inbox"
    tables = _inbox(inbox)
    home = tmp_path / "home"

    same = {"chunk_rows": 400, "precision": "bf16"}
    plain = run_flow(str(inbox), tmp_path / "out-default", str(tiny_cross), home, **same)
    dask = run_flow(str(inbox), tmp_path / "out-dask", str(tiny_cross), home, **same, local_cluster=2)

    for summary in (plain, dask):
        counts = (summary.files_scored, summary.files_quarantined, summary.rows_scored, summary.rows_rejected)
        assert counts == (2, 1, 2899, 1)
        assert summary.run_id.startswith("prefect-") and summary.precision == BF16_RUNS_AS
    first, second = outputs_by_name(tmp_path / "out-default"), outputs_by_name(tmp_path / "out-dask")
    assert len(first) == 2
    assert_same_outputs(first, second)
    assert {p for t in second.values() for p in t.column("precision").to_pylist()} == {BF16_RUNS_AS}
    assert_exactly_once(tables["a.parquet"], next(t for n, t in first.items() if "/a-" in n))
    assert_exactly_once(tables["b.parquet"], next(t for n, t in second.items() if "/b-" in n), {"b0000010"})

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, FlowRunFilter, TaskRunFilter
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["nightly-score-summary"])),
            flow_run_filter=FlowRunFilter(),  # Prefect 3.8's sync client sends null for omitted arguments
            task_run_filter=TaskRunFilter(),
            sort=ArtifactSort.CREATED_DESC,
            limit=50,
            offset=0,
        )
    published = [a.data for a in artifacts if plain.run_id in str(a.data) or dask.run_id in str(a.data)]
    assert len(published) == 2
    assert all("| 2 | 0 | 1 | 2899 | 1 |" in text and "c-broken.parquet" in text for text in published)
