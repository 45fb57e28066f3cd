"""Re-scoring with a new model: each batch is scored once per model version, against a real registry.

Two tiny paraphrase models are registered once as versions 1 and 2 of `simpair-paraphrase` in an
embedded MLflow SQLite registry. Batches scored by version 1 are skipped by later runs, whatever the
champion; `simpair score --rescore` after promoting version 2 scores them again into version 2's own
outputs while version 1's stay byte for byte, and a second `--rescore` skips. A ledger from before
re-scoring existed (no `rescores` table) reads its batches as done by the version they record. The
nightly profile's `scoring.rescore_days_after_promotion` makes the `nightly-score` flow re-score only
the batches of the last N days, once, after a promotion.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from test_scoring_support import assert_exactly_once, make_pairs, write_batch
from typer.testing import CliRunner

from simpair import settings
from simpair.cli import app
from simpair.models import save_tiny_model
from simpair.registry import registry
from simpair.registry.record import RegisteredVersion, register_trained_model
from simpair.scoring import score_inbox
from simpair.scoring.ledger import Ledger

NAME = "simpair-paraphrase"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def versions(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, RegisteredVersion, RegisteredVersion]]:
    """One home whose registry holds tiny versions 1 and 2 (registering costs seconds: done once)."""
    root = tmp_path_factory.mktemp("rescore")
    home = root / "home"
    home.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SIMPAIR_HOME", str(home))
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{home / 'mlflow' / 'mlflow.db'}")
        registered = []
        for seed in (0, 1):
            model_dir = save_tiny_model(root / f"tiny-{seed}", task="paraphrase", kind="cross", seed=seed)
            (model_dir / "metrics.json").write_text('{"dev": {"accuracy": 0.5}}\n')
            registered.append(register_trained_model(home, model_dir, {"name": f"tiny-{seed}"}, {}))
        v1, v2 = registered
        assert (v1.version, v2.version) == ("1", "2")
        yield home, v1, v2


def _promote(home: Path, version: str) -> None:
    registry.move_champion(registry.client(home), NAME, version, reason="test", by="test", action="promote")


def _inbox(root: Path) -> dict[str, pa.Table]:
    tables = {
        "a.parquet": make_pairs(300, seed=60, prefix="a"),
        "b.parquet": make_pairs(200, seed=61, prefix="b"),
    }
    text_b = tables["b.parquet"].column("text_b").to_pylist()
    text_b[5] = "  "  # a rejected row: rejects are written per version too
    tables["b.parquet"] = tables["b.parquet"].set_column(2, "text_b", pa.array(text_b, pa.string()))
    for name, table in tables.items():
        write_batch(table, root / name, row_group_size=100)
    return tables


def _score_cli(inbox: Path, out: Path, home: Path, *extra: str) -> dict:
    """`simpair score --no-prefect` in this process; the summary it wrote as JSON."""
    summary = out.parent / "summary.json"
    args = ["score", "--inbox", str(inbox), "--out", str(out), "--home", str(home), "--chunk-rows", "128"]
    result = CliRunner().invoke(app, [*args, "--no-prefect", "--json", str(summary), *extra])
    assert result.exit_code == 0, result.output
    return json.loads(summary.read_text())


def _digests(paths: list[Path]) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_rescore_scores_every_batch_again_into_the_new_version_outputs_once(
    versions: tuple[Path, RegisteredVersion, RegisteredVersion], tmp_path: Path
) -> None:
    home, v1, v2 = versions
    _promote(home, "1")
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    tables = _inbox(inbox)

    first = _score_cli(inbox, out, home)
    assert (first["model_version"], first["files_scored"]) == ("1", 2)
    v1_outputs = sorted(out.glob("date=*/*.parquet")) + sorted(out.glob("_rejects/date=*/*.parquet"))
    assert len(v1_outputs) == 3
    before = _digests(v1_outputs)
    assert _score_cli(inbox, out, home)["files_skipped"] == 2  # same version: skipped

    _promote(home, "2")
    plain = _score_cli(inbox, out, home)  # a new champion alone re-scores nothing, as before
    assert (plain["model_version"], plain["files_scored"], plain["files_skipped"]) == ("2", 0, 2)

    again = _score_cli(inbox, out, home, "--rescore")
    assert (again["model_version"], again["files_scored"], again["files_rescored"]) == ("2", 2, 2)
    assert {f["status"] for f in again["files"]} == {"rescored"}
    assert again["rescore"] and again["rows_scored"] == 499 and again["rows_rejected"] == 1

    tree = out / "_rescored" / NAME / "2"
    for name, rejected in (("a", set()), ("b", {"b0000005"})):
        [path] = tree.glob(f"date=*/{name}-*.parquet")
        rescored = pq.read_table(path)
        assert_exactly_once(tables[f"{name}.parquet"], rescored, rejected)
        assert set(rescored.column("model_version").to_pylist()) == {"2"}
        assert set(rescored.column("model_run_id").to_pylist()) == {v2.run_id}
        [old] = out.glob(f"date=*/{name}-*.parquet")
        assert path.parent.name == old.parent.name  # same date partition, in the version's own tree
        old_scores = pq.read_table(old).column("score").to_numpy()
        assert np.abs(rescored.column("score").to_numpy() - old_scores).max() > 1e-3
    assert len(list(tree.glob("_rejects/date=*/b-*.rejects.parquet"))) == 1
    assert _digests(v1_outputs) == before  # version 1's outputs stay, untouched
    assert sorted(out.glob("date=*/*.parquet")) == sorted(p for p in v1_outputs if "_rejects" not in str(p))

    ledger = Ledger(out)
    for record in ledger.files():
        assert [(s.model_version, s.status, s.first) for s in ledger.scorings(record.sha256)] == [
            ("1", "done", True),
            ("2", "done", False),
        ]

    twice = _score_cli(inbox, out, home, "--rescore")  # exactly once per version
    assert (twice["files_scored"], twice["files_skipped"]) == (0, 2)
    assert {f["status"] for f in twice["files"]} == {"done_before"}


def test_ledger_written_before_rescoring_reads_as_the_version_it_recorded(
    versions: tuple[Path, RegisteredVersion, RegisteredVersion], tmp_path: Path
) -> None:
    home, _, _ = versions
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    _inbox(inbox)
    assert score_inbox(str(inbox), out, f"{NAME}/1", home, chunk_rows=128).files_scored == 2
    db = out / "_ledger" / "ledger.sqlite"
    with sqlite3.connect(db) as conn:  # the ledger as the code before re-scoring wrote it
        conn.execute("DROP TABLE rescores")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"files", "chunks", "runs"}

    same = score_inbox(str(inbox), out, f"{NAME}/1", home, chunk_rows=128, rescore=True)
    assert (same.files_scored, same.files_skipped) == (0, 2)  # done by version 1, as recorded
    other = score_inbox(str(inbox), out, f"{NAME}/2", home, chunk_rows=128, rescore=True)
    assert (other.files_rescored, other.files_skipped) == (2, 0)
    assert len(list((out / "_rescored" / NAME / "2").glob("date=*/*.parquet"))) == 2


def _profile(path: Path, days: int) -> Path:
    """The smoke nightly profile with the promotion re-score window set."""
    profile = yaml.safe_load(settings.shipped_path("configs/nightly-smoke.yaml").read_text())
    profile["scoring"] = {"rescore_days_after_promotion": days}
    path.write_text(yaml.safe_dump(profile))
    return path


def test_profile_rescores_only_the_last_n_days_once_after_a_promotion(
    prefect_api: None, versions: tuple[Path, RegisteredVersion, RegisteredVersion], tmp_path: Path
) -> None:
    from simpair.flows.nightly_score import nightly_score

    home, _, _ = versions
    _promote(home, "1")
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    tables = _inbox(inbox)
    profile = str(_profile(tmp_path / "nightly.yaml", days=3))
    assert score_inbox(str(inbox), out, None, home, chunk_rows=128).files_scored == 2
    old_day = (datetime.now(UTC).date() - timedelta(days=10)).isoformat()
    with sqlite3.connect(out / "_ledger" / "ledger.sqlite") as conn:  # `a` arrived 10 days ago
        conn.execute("UPDATE files SET day = ? WHERE name = 'a.parquet'", (old_day,))

    def night(**params: object) -> dict:
        return nightly_score(str(inbox), str(out), profile=profile, **params).to_dict()

    _promote(home, "2")
    after = night()
    assert (after["model_version"], after["files_rescored"], after["files_skipped"]) == ("2", 1, 1)
    assert "promotion" in after["rescore"] and "version 1" in after["rescore"]
    status = {f["file"]: f["status"] for f in after["files"]}
    assert status == {"a.parquet": "done_before", "b.parquet": "rescored"}
    [path] = (out / "_rescored" / NAME / "2").glob("date=*/*.parquet")
    assert path.name.startswith("b-")
    assert_exactly_once(tables["b.parquet"], pq.read_table(path), {"b0000005"})

    later = night()  # the promotion was handled: the next night re-scores nothing
    assert (later["files_rescored"], later["files_skipped"], later["rescore"]) == (0, 2, None)

    asked = night(rescore=True)  # the flow's parameter: every batch, whatever its day
    assert (asked["files_rescored"], asked["files_skipped"]) == (1, 1)
    assert {f["file"]: f["status"] for f in asked["files"]}["a.parquet"] == "rescored"


def test_profile_and_cli_refuse_a_bad_rescore_setting(tmp_path: Path) -> None:
    from simpair.nightly.profile import load_profile

    bad = _profile(tmp_path / "bad.yaml", days=-1)
    with pytest.raises(ValueError, match="rescore_days_after_promotion"):
        load_profile(bad)
    assert load_profile(_profile(tmp_path / "ok.yaml", days=7)).scoring.rescore_days_after_promotion == 7
    result = CliRunner().invoke(
        app, ["score", "--inbox", str(tmp_path), "--out", str(tmp_path / "out"), "--rescore-days", "3"]
    )
    assert result.exit_code == 2 and "rescore" in result.output
