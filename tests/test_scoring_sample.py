"""`simpair make-sample-inbox` + `simpair score` end to end on the real held-out test pairs.

Ingests the raw MSRP/STS-B files, builds the label-free sample inbox through the Catalog, and scores
it with the `simpair score` command in a subprocess (the path `make run` takes), with a tiny model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import test_scoring_support as support
from test_scoring_support import read_outputs

from simpair.catalog import Catalog
from simpair.ingest import run_ingest
from simpair.scoring.sample import make_sample_inbox

tiny_cross = support.tiny_cross
SIMPAIR = str(Path(sys.executable).with_name("simpair"))
pytestmark = pytest.mark.slow


def test_sample_inbox_from_test_splits_is_label_free_and_scores(
    shared_data: Path, home: Path, tmp_path: Path, tiny_cross: Path
) -> None:
    run_ingest(shared_data, home)
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    written = make_sample_inbox(home, inbox)
    assert sorted(p.name for p in written) == ["msrp-test.parquet", "stsb-test.parquet"]
    catalog = Catalog(home)
    expected_ids: list[str] = []
    for path in sorted(written):
        dataset = path.name.split("-")[0]
        table = pq.read_table(path)
        assert not {"label", "score", "score_raw"} & set(table.column_names)  # labels dropped
        gold = catalog.read_split(dataset, "test")
        assert table.column("pair_id").to_pylist() == gold["pair_id"].to_list()
        expected_ids += table.column("pair_id").to_pylist()

    summary_path = tmp_path / "summary.json"
    done = subprocess.run(
        [SIMPAIR, "score", "--inbox", str(inbox), "--out", str(out), "--model", str(tiny_cross),
         "--home", str(home), "--no-prefect", "--json", str(summary_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "msrp-test.parquet" in done.stdout and "pairs/s" in done.stdout
    summary = json.loads(summary_path.read_text())
    assert (summary["files_scored"], summary["rows_rejected"]) == (2, 0)
    output = read_outputs(out)
    assert sorted(output.column("pair_id").to_pylist()) == sorted(expected_ids)
    assert output.column("dataset").unique().to_pylist() in (["msrp", "stsb"], ["stsb", "msrp"])


def test_score_command_without_champion_exits_with_message(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an earlier test's mlflow.set_tracking_uri may have exported MLFLOW_TRACKING_URI: use this home's store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{home / 'mlflow' / 'mlflow.db'}")
    (tmp_path / "inbox").mkdir()
    done = subprocess.run(
        [SIMPAIR, "score", "--inbox", str(tmp_path / "inbox"), "--out", str(tmp_path / "out"),
         "--home", str(home), "--no-prefect"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.startswith("error: no model simpair-paraphrase@champion")
