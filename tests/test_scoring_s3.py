"""An `s3://` inbox for real: a moto S3 server process on 127.0.0.1, `simpair score` as a subprocess.

Nothing is mocked inside the scoring run: it lists, hashes and reads the batches through fsspec + s3fs
over HTTP from a separate S3-compatible server, configured only by the standard AWS environment
variables (`AWS_ENDPOINT_URL`, keys, region), exactly as a production run against MinIO or S3 would be.
The outputs are checked row by row against the uploaded tables and against scoring the same pairs
in memory; a second run must skip every batch, and a batch added to the bucket later is new work.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import test_scoring_support as support
from test_scoring_support import assert_exactly_once, make_pairs, read_rejects

from simpair.runtime.loader import load_predictor

tiny_cross = support.tiny_cross
SIMPAIR = str(Path(sys.executable).with_name("simpair"))
BUCKET = "nightly"
pytestmark = pytest.mark.slow


def s3_client(env: dict[str, str]):  # noqa: ANN202 - s3fs is an optional import
    """An s3fs client of the test's own (the scoring subprocess builds its own from the same env)."""
    import s3fs

    return s3fs.S3FileSystem(
        key=env["AWS_ACCESS_KEY_ID"],
        secret=env["AWS_SECRET_ACCESS_KEY"],
        endpoint_url=env["AWS_ENDPOINT_URL"],
        skip_instance_cache=True,
    )


def _upload(fs, table: pa.Table, key: str, row_group_size: int = 300) -> None:  # noqa: ANN001
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=row_group_size)
    fs.pipe(f"{BUCKET}/{key}", buffer.getvalue())


def _score(env: dict[str, str], out: Path, model: Path) -> dict:
    summary = out.parent / f"{out.name}-summary-{time.monotonic_ns()}.json"
    cmd = [SIMPAIR, "score", "--inbox", f"s3://{BUCKET}/inbox", "--out", str(out), "--model", str(model),
           "--chunk-rows", "400", "--threads", "1", "--no-prefect", "--json", str(summary)]  # fmt: skip
    done = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(summary.read_text())


def _output(out: Path, stem: str) -> pa.Table:
    [path] = sorted(out.glob(f"date=*/{stem}-*.parquet"))  # nested names are flattened: 2026/x -> 2026__x
    return pq.read_table(path)


def test_s3_inbox_scores_each_batch_once(s3_env: dict[str, str], tmp_path: Path, tiny_cross: Path) -> None:
    fs = s3_client(s3_env)
    fs.mkdir(BUCKET)
    out = tmp_path / "out"
    # S3 has no folders: before the first upload the inbox prefix does not exist, and that is an
    # empty inbox (nothing to do), not an error that fails the nightly run.
    empty = _score(s3_env, out, tiny_cross)
    assert (empty["files_scored"], empty["files"]) == (0, [])

    first = make_pairs(1000, seed=50, prefix="s")
    text_a = first.column("text_a").to_pylist()
    text_a[123] = None  # a row-level problem travels through S3 like any other
    first = first.set_column(1, "text_a", pa.array(text_a, pa.string()))
    second = make_pairs(450, seed=51, prefix="t")
    _upload(fs, first, "inbox/2026/first.parquet")
    _upload(fs, second, "inbox/second.parquet")
    fs.pipe(f"{BUCKET}/inbox/_SUCCESS", b"")  # ignored: starts with "_"
    fs.pipe(f"{BUCKET}/inbox/notes.csv", b"a,b\n1,2\n")  # not Parquet: quarantined, not fatal

    summary = _score(s3_env, out, tiny_cross)
    assert (summary["files_scored"], summary["files_quarantined"]) == (2, 1)
    assert (summary["rows_scored"], summary["rows_rejected"]) == (1449, 1)
    statuses = {item["file"]: item["status"] for item in summary["files"]}
    assert statuses == {
        "2026/first.parquet": "scored",
        "second.parquet": "scored",
        "notes.csv": "quarantined",
    }

    got_first, got_second = _output(out, "2026__first"), _output(out, "second")
    assert_exactly_once(first, got_first, {"s0000123"})
    assert_exactly_once(second, got_second)
    rejects = read_rejects(out)
    assert rejects is not None and rejects.column("pair_id").to_pylist() == ["s0000123"]
    assert rejects.column("reason").to_pylist() == ["null_text"]
    assert rejects.column("source_file").to_pylist() == ["2026/first.parquet"]

    # Scores equal the model's on the same pairs in memory: the S3 path changes where bytes come from only.
    predictor = load_predictor(tiny_cross)
    for table, got in (
        (first.filter(pa.compute.is_valid(first.column("text_a"))), got_first),
        (second, got_second),
    ):
        want = predictor.predict(table.column("text_a").to_pylist(), table.column("text_b").to_pylist())
        np.testing.assert_allclose(got.column("score").to_numpy(), want["score"], atol=1e-6)
        assert got.column("label").to_pylist() == want["label"].tolist()

    # A re-run finds nothing new; a batch uploaded later is the only new work.
    before = {p: p.stat().st_mtime_ns for p in out.glob("date=*/*.parquet")}
    again = _score(s3_env, out, tiny_cross)
    assert (again["files_scored"], again["rows_scored"]) == (0, 0)
    assert {item["status"] for item in again["files"]} == {"done_before", "quarantined_before"}
    assert {p: p.stat().st_mtime_ns for p in out.glob("date=*/*.parquet")} == before

    third = make_pairs(120, seed=52, prefix="u")
    _upload(fs, third, "inbox/third.parquet")
    late = _score(s3_env, out, tiny_cross)
    assert (late["files_scored"], late["rows_scored"]) == (1, 120)
    assert_exactly_once(third, _output(out, "third"))
