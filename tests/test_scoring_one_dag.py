"""One scoring DAG: the Prefect flow and `--no-prefect` run the same stages and end in the same state.

The inbox has a batch whose middle chunk hits corrupt data pages, next to a good batch with a bad
row and a file that is not Parquet at all. Both paths must write the same outputs and rejects, leave
the same ledger rows (files, every chunk of the corrupt batch but the bad one, the run summary) and
report the same summary; only run ids, timings and timestamps may differ.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import test_scoring_support as support
from test_scoring_support import (
    assert_exactly_once,
    assert_same_outputs,
    corrupt_row_group,
    make_pairs,
    outputs_by_name,
    write_batch,
)

from simpair.scoring import ScoringOptions, score_inbox
from simpair.scoring.chunk import score_chunk
from simpair.scoring.commit import finalize_file
from simpair.scoring.plan import hash_file, plan_files
from simpair.scoring.run import run_scoring
from simpair.stages import InProcess

tiny_cross = support.tiny_cross

VOLATILE = {"run_id", "seconds", "updated_at", "first_seen", "started_at", "finished_at"}
VOLATILE_SUMMARY = {"run_id", "scoring_seconds", "pairs_per_s"}


def _inbox(root: Path) -> dict[str, pa.Table]:
    tables = {
        "a-good.parquet": make_pairs(700, seed=40, prefix="a"),
        "b-bad-chunk.parquet": make_pairs(1000, seed=41, prefix="b"),
    }
    text_b = tables["a-good.parquet"].column("text_b").to_pylist()
    text_b[7] = "   "
    tables["a-good.parquet"] = tables["a-good.parquet"].set_column(2, "text_b", pa.array(text_b, pa.string()))
    write_batch(tables["a-good.parquet"], root / "a-good.parquet", row_group_size=200)
    write_batch(tables["b-bad-chunk.parquet"], root / "b-bad-chunk.parquet", row_group_size=200)
    corrupt_row_group(root / "b-bad-chunk.parquet", 2)  # rows 400-599: chunk 2 of 5
    (root / "c-not-parquet.parquet").write_bytes(b"PAR1 truncated upload")
    return tables


def _ledger_state(out: Path) -> dict[str, list[dict]]:
    """Every ledger row with run ids, timings and timestamps dropped, paths made relative to `out`."""
    state: dict[str, list[dict]] = {}
    with sqlite3.connect(out / "_ledger" / "ledger.sqlite") as conn:
        conn.row_factory = sqlite3.Row
        for table, order in (("files", "name"), ("chunks", "sha256, idx"), ("runs", "started_at")):
            rows = []
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}"):
                item = {k: row[k] for k in row.keys() if k not in VOLATILE}  # noqa: SIM118 - sqlite3.Row
                for key in ("output_path", "rejects_path"):
                    if item.get(key):
                        item[key] = str(Path(item[key]).relative_to(out))
                if item.get("summary_json"):
                    item["summary_json"] = _summary(json.loads(item["summary_json"]), out)
                rows.append(item)
            state[table] = rows
    return state


def _summary(summary: dict, out: Path) -> dict:
    summary = {k: v for k, v in summary.items() if k not in VOLATILE_SUMMARY}
    summary["files"] = [f | {"detail": str(f["detail"]).replace(str(out), "<out>")} for f in summary["files"]]
    return summary


def _rejects(out: Path) -> dict[str, pa.Table]:
    return {
        p.relative_to(out).as_posix(): pq.read_table(p).drop_columns(["run_id"])
        for p in sorted(out.glob("_rejects/date=*/*.parquet"))
    }


def test_in_process_runner_calls_the_stages_in_the_flows_order(tmp_path: Path, tiny_cross: Path) -> None:
    """Every chunk of every file is scored (none skipped after a bad one), then each file finalized."""
    inbox = tmp_path / "inbox"
    _inbox(inbox)
    calls: list[tuple[str, object]] = []

    def record(stage: object, value: object) -> None:
        name = getattr(stage, "__name__", str(stage))
        calls.append((name, getattr(value, "idx", None) if stage is score_chunk else None))

    options = ScoringOptions(model=str(tiny_cross), home=tmp_path / "home", chunk_rows=200, threads=1)
    run_scoring(str(inbox), tmp_path / "out", options, InProcess(record))
    names = [name for name, _ in calls]
    assert names[:4] == ["resolve_model_ref", "start_run", "list_inbox", hash_file.__name__]
    assert names.index(plan_files.__name__) < names.index(score_chunk.__name__)
    assert [idx for name, idx in calls if name == score_chunk.__name__] == [0, 1, 2, 3, 0, 1, 2, 3, 4]
    last_chunk = max(i for i, (name, _) in enumerate(calls) if name == score_chunk.__name__)
    assert [name for name, _ in calls[last_chunk + 1 :]] == [finalize_file.__name__] * 2 + ["finish_run"]


@pytest.mark.slow
@pytest.mark.integration
def test_flow_and_no_prefect_give_the_same_outputs_and_ledger_with_a_bad_chunk(
    prefect_api: None, tmp_path: Path, tiny_cross: Path
) -> None:
    from simpair.flows.launch import score as run_flow

    inbox = tmp_path / "inbox"
    tables = _inbox(inbox)
    options = ScoringOptions(model=str(tiny_cross), home=tmp_path / "home", chunk_rows=200, threads=1)
    flow_out, plain_out = tmp_path / "out-flow", tmp_path / "out-no-prefect"

    by_flow = run_flow(str(inbox), flow_out, options=options)
    in_process = score_inbox(str(inbox), plain_out, options=options)

    assert by_flow.run_id.startswith("prefect-") and not in_process.run_id.startswith("prefect-")
    assert _summary(by_flow.to_dict(), flow_out) == _summary(in_process.to_dict(), plain_out)
    status = {f["file"]: f["status"] for f in in_process.files}
    assert status == {
        "a-good.parquet": "scored",
        "b-bad-chunk.parquet": "quarantined",
        "c-not-parquet.parquet": "quarantined",
    }

    first, second = outputs_by_name(flow_out), outputs_by_name(plain_out)
    assert len(first) == 1
    assert_same_outputs(first, second)
    assert_exactly_once(tables["a-good.parquet"], next(iter(second.values())), {"a0000007"})
    flow_rejects, plain_rejects = _rejects(flow_out), _rejects(plain_out)
    assert list(flow_rejects) == list(plain_rejects) and len(flow_rejects) == 1
    assert all(flow_rejects[k].equals(plain_rejects[k]) for k in flow_rejects)
    for out in (flow_out, plain_out):
        assert not list((out / "_staging").glob("*/*"))  # the quarantined batch's parts are gone

    flow_state, plain_state = _ledger_state(flow_out), _ledger_state(plain_out)
    assert flow_state == plain_state
    corrupt_sha = next(f["sha256"] for f in plain_state["files"] if f["name"] == "b-bad-chunk.parquet")
    recorded = [c["idx"] for c in plain_state["chunks"] if c["sha256"] == corrupt_sha]
    assert recorded == []  # quarantining a batch forgets its chunks
    # every chunk but the corrupt one ran on both paths: 699 good rows + chunks 0, 1, 3, 4 of the bad
    # batch (a sequential path that stopped at the bad chunk would have scored 1099)
    assert by_flow.rows_scored_this_run == in_process.rows_scored_this_run == 699 + 4 * 200
    assert [r["status"] for r in plain_state["runs"]] == ["finished"]
