"""Monitoring where the pipeline runs: a registered or imported version carries its reference profile,
and every scoring run writes a traffic profile and its drift report against that reference and the
last runs of the same version.

A toy dataset ingested into the test's home (its dev split is the reference's pairs), tiny random
models, the embedded MLflow registry, real scoring runs in process.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import polars as pl
import pyarrow as pa
import pytest
import test_scoring_support as support
from test_scoring_int8 import _ingest_toy, _tiny_with_dev
from test_scoring_support import make_pairs, write_batch
from typer.testing import CliRunner

from simpair.cli import app
from simpair.monitoring.profile import Profile
from simpair.monitoring.reference import NO_REFERENCE, REFERENCE_DIR
from simpair.nightly.night import attach_references
from simpair.nightly.summary import Trained
from simpair.registry import registry
from simpair.registry.monitoring import MONITOR_EXPERIMENT, REFERENCE_PAIRS_TAG, REFERENCE_TAG
from simpair.registry.record import register_trained_model
from simpair.scoring import score_inbox
from simpair.stages import InProcess

NAME = "simpair-paraphrase"
tiny_cross = support.tiny_cross


def _trained(model_dir: Path) -> Trained:
    return Trained(
        task="paraphrase", model_dir=str(model_dir), config={"name": model_dir.name}, metrics={"dev_f1": 0.5},
        history=[], eval_metrics={}, eval_artifacts=[], seconds=1.0,
    )  # fmt: skip


@pytest.fixture
def registered(home: Path, tmp_path: Path, one_thread: None) -> tuple[Path, str]:
    """Version 1 of a tiny cross-encoder whose dev split is `toy/dev`, with its reference attached as
    the night attaches it; returns the model folder and the version."""
    dev_ids = _ingest_toy(home, tmp_path)
    model_dir = _tiny_with_dev(tmp_path / "tiny", dev_ids)
    version = register_trained_model(home, model_dir, {"name": "tiny"}, {"dev_f1": 0.5})
    ran: list[str] = []
    lines = attach_references(
        [_trained(model_dir)], [version], home, InProcess(lambda s, _: ran.append(s.__name__))
    )
    assert ran == ["build_reference_profile"] and lines == ["reference profile: 120 pairs of toy/dev"]
    return model_dir, version.version


def test_a_registered_version_carries_its_reference_profile(home: Path, registered: tuple[Path, str]) -> None:
    model_dir, version = registered
    c = registry.client(home)
    mv = c.get_model_version(NAME, version)
    assert mv.tags[REFERENCE_TAG] == "1" and mv.tags[REFERENCE_PAIRS_TAG] == "120"
    run = c.get_run(mv.run_id)
    assert run.data.tags[REFERENCE_TAG] == "1"
    listed = {a.path for a in c.list_artifacts(mv.run_id, "monitor/reference")}
    assert "monitor/reference/profile.json" in listed
    local = Profile.load(model_dir / REFERENCE_DIR)
    assert (local.kind, local.model, local.version, local.n_pairs) == ("reference", NAME, version, 120)
    assert local.threshold is not None and local.histograms["tokens"].total == 240  # both texts of each pair


def test_the_flow_builds_the_reference_after_registering_and_before_challengers() -> None:
    from simpair.flows.nightly_retrain import NIGHT

    names = [t.name for t in NIGHT]
    assert names.index("register-model") < names.index("build-reference-profile")
    assert names.index("build-reference-profile") < names.index("mark-challengers")


def test_scoring_runs_write_their_traffic_profile_and_compare_with_reference_and_history(
    home: Path, registered: tuple[Path, str], tmp_path: Path
) -> None:
    _, version = registered
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    write_batch(make_pairs(300, seed=3), inbox / "night1.parquet")
    first = score_inbox(str(inbox), out, f"{NAME}/{version}", home, chunk_rows=150, threads=1, monitor={})

    run1 = out / "_monitor" / NAME / version / first.run_id
    traffic = Profile.load(run1)
    assert (traffic.kind, traffic.run_id, traffic.n_pairs) == ("traffic", first.run_id, 300)
    assert traffic.health["rows_in"] == 300 and traffic.health["pairs_per_s"] == first.pairs_per_s
    assert not (run1 / "chunks").exists()  # the chunks' partials are merged and gone
    report = json.loads((run1 / "monitor.json").read_text())
    assert report["history_nights"] == 0 and {r["against"] for r in report["rows"]} == {"reference", "run"}
    assert (run1 / "monitor_reference.png").is_file()
    assert first.monitor == str(run1 / "monitor.json")
    assert first.monitor_alarms == sum(r["alarm"] for r in report["rows"])
    # the reference came from the version's MLflow run, and a copy stays beside the traffic
    assert Profile.load(out / "_monitor" / NAME / version / "reference").n_pairs == 120

    # a new upstream sends texts three times longer: the second run alarms, and its summary says on what
    longer = make_pairs(300, seed=4)
    for side in ("text_a", "text_b"):
        tripled = pa.array([" ".join([t] * 3) for t in longer[side].to_pylist()])
        longer = longer.set_column(longer.schema.get_field_index(side), side, tripled)
    write_batch(longer, inbox / "night2.parquet")
    second = score_inbox(str(inbox), out, f"{NAME}/{version}", home, chunk_rows=150, threads=1, monitor={})
    report = json.loads(Path(second.monitor).read_text())
    assert report["history_nights"] == 1 and "history" in {r["against"] for r in report["rows"]}
    alarmed = {(r["statistic"], r["against"]) for r in report["rows"] if r["alarm"]}
    assert (
        "tokens",
        "history",
    ) in alarmed  # (the 120-pair reference is below min_pairs: shown, never alarmed)
    assert second.monitor_alarms == len([r for r in report["rows"] if r["alarm"]])
    assert "tokens psi" in second.monitor_note and "against the history" in second.monitor_note
    logged = mlflow.search_runs(
        experiment_names=[MONITOR_EXPERIMENT], filter_string=f"tags.`simpair.model_version` = '{version}'"
    )
    assert sorted(logged["tags.simpair.scoring_run_id"]) == sorted([first.run_id, second.run_id])
    assert "metrics.alarms" in logged and "metrics.health.rejected_rate" in logged


def test_a_model_without_a_reference_is_scored_and_says_drift_is_not_checked(
    tmp_path: Path, tiny_cross: Path
) -> None:
    """`simpair score` monitors by default; a model with no reference gets the run's health rows and
    one line; `--no-monitor` writes nothing under `_monitor`."""
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    write_batch(make_pairs(50, seed=5), inbox / "batch.parquet")
    base = ["score", "--inbox", str(inbox), "--out", str(out), "--model", str(tiny_cross),
            "--home", str(tmp_path / "home"), "--no-prefect", "--threads", "1"]  # fmt: skip
    result = CliRunner().invoke(app, [*base, "--json", str(tmp_path / "on.json")], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert NO_REFERENCE in result.output.splitlines()
    summary = json.loads((tmp_path / "on.json").read_text())
    assert summary["rows_scored"] == 50 and summary["monitor_note"].startswith(NO_REFERENCE)
    assert f"monitor: {NO_REFERENCE}" in " ".join(result.output.split())
    rows = json.loads(Path(summary["monitor"]).read_text())["rows"]
    assert rows and {r["against"] for r in rows} == {"run"}  # the run's health, no drift rows

    write_batch(make_pairs(50, seed=6), inbox / "batch2.parquet")
    result = CliRunner().invoke(app, [*base, "--no-monitor", "--json", str(tmp_path / "off.json")])
    assert result.exit_code == 0, result.output
    off = json.loads((tmp_path / "off.json").read_text())
    assert off["monitor"] is None and off["rows_scored"] == 50 and NO_REFERENCE not in result.output
    assert len(list((out / "_monitor").glob("*/*/*/profile.json"))) == 1


def test_a_model_imported_with_a_dev_file_carries_a_reference(
    home: Path, tmp_path: Path, tiny_cross: Path, one_thread: None
) -> None:
    from simpair.model_import import import_model

    pairs = make_pairs(60, seed=8)
    dev = tmp_path / "dev.csv"
    pl.DataFrame(
        {"text_a": pairs["text_a"].to_pylist(), "text_b": pairs["text_b"].to_pylist(), "label": [0, 1] * 30}
    ).write_csv(dev)
    result = import_model(home, str(tiny_cross), "paraphrase", dev=str(dev), alias="none")
    assert result.reference == f"reference profile: 60 pairs of {dev.resolve()}"
    assert result.reference in result.lines()
    tags = registry.client(home).get_model_version(result.name, result.version).tags
    assert tags[REFERENCE_TAG] == "1" and tags[REFERENCE_PAIRS_TAG] == "60"
