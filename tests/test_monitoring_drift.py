"""Drift rules on synthetic profiles: quiet on the same distribution, alarmed by each kind of move;
the report files, the store and `simpair monitor` on a real folder of stored profiles."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from simpair import settings
from simpair.cli import app
from simpair.monitoring import store
from simpair.monitoring.drift import compare, write_report
from simpair.monitoring.policy import MonitorPolicy
from simpair.monitoring.profile import Histogram, Profile, VectorSample

DIM = 24


def synthetic(
    seed: int,
    n: int = 2000,
    *,
    kind: str = "traffic",
    length: float = 14.0,
    rare: float = 0.08,
    score_a: float = 2.0,
    score_b: float = 2.0,
    shift: float = 0.0,
    run_id: str | None = None,
    created: datetime | None = None,
    health: dict[str, float] | None = None,
) -> Profile:
    """A profile as the builder would make it from `n` pairs of one synthetic domain."""
    rng = np.random.default_rng(seed)
    tokens = np.maximum(1, rng.gamma(4.0, length / 4.0, size=2 * n)).round()
    scores = rng.beta(score_a, score_b, size=n)
    profile = Profile(
        kind=kind, model="m", version="1", run_id=run_id, form="bi", threshold=0.5, max_length=64
    )
    h = profile.histograms
    h["tokens"].add(tokens)
    h["rare"].add(rng.beta(1.0, (1 - rare) / rare, size=2 * n))
    h["truncated"] = Histogram.of("truncated").add((tokens[:n] + 2 > 64).astype(float))
    h["score"].add(scores)
    profile.n_pairs, profile.positives = n, int((scores >= 0.5).sum())
    centre = np.zeros(DIM)
    centre[0] = shift
    profile.vectors = VectorSample(k=256).add(rng.normal(size=(n, DIM)) + centre)
    profile.health = health or {
        "rows_in": n,
        "rejected": 0,
        "quarantined": 0,
        "duplicates": 0,
        "pairs_per_s": 500,
    }
    if created:
        profile.created = created
    return profile


@pytest.fixture(scope="module")
def reference() -> Profile:
    return synthetic(0, kind="reference")


def test_same_distribution_stays_quiet(reference: Profile) -> None:
    history = [
        synthetic(10 + i, run_id=f"r{i}", created=datetime.now(UTC) - timedelta(days=5 - i)) for i in range(3)
    ]
    report = compare(synthetic(1, run_id="tonight"), reference, history, MonitorPolicy())
    assert report.alarms == [], report.to_markdown()
    against = {r.against for r in report.rows}
    assert against == {"reference", "history", "run"}
    assert {"psi", "ks", "classifier_auc", "mmd_p", "shift", "share_shift"} <= {r.test for r in report.rows}


def _alarmed(report) -> set[tuple[str, str]]:
    return {(r.statistic, r.test) for r in report.alarms if r.against == "reference"}


def test_another_domain_alarms_on_meaning_and_rare_pieces(reference: Profile) -> None:
    report = compare(synthetic(2, rare=0.3, shift=1.5), reference, [], MonitorPolicy())
    assert {("vectors", "classifier_auc"), ("vectors", "mmd_p"), ("rare", "psi")} <= _alarmed(report)
    assert ("score", "psi") not in _alarmed(report)


def test_texts_three_times_longer_alarm_on_length_and_truncation(reference: Profile) -> None:
    report = compare(synthetic(3, length=42.0), reference, [], MonitorPolicy())
    assert {("tokens", "psi"), ("tokens", "ks"), ("truncated", "share_shift")} <= _alarmed(report)
    assert ("vectors", "classifier_auc") not in _alarmed(report)


def test_scores_of_another_model_alarm_on_scores(reference: Profile) -> None:
    report = compare(synthetic(4, score_a=5.0, score_b=2.0), reference, [], MonitorPolicy())
    assert {("score", "psi"), ("score", "ks"), ("positive_rate", "shift")} <= _alarmed(report)
    assert ("tokens", "psi") not in _alarmed(report)


def test_health_alarms_and_small_batches_never_alarm_on_distributions(reference: Profile) -> None:
    past = [
        synthetic(20 + i, run_id=f"h{i}", created=datetime.now(UTC) - timedelta(days=3 - i)) for i in range(3)
    ]
    sick = synthetic(
        5, health={"rows_in": 2000, "rejected": 300, "quarantined": 0, "duplicates": 0, "pairs_per_s": 100}
    )
    alarms = {(r.statistic, r.against) for r in compare(sick, reference, past, MonitorPolicy()).alarms}
    assert alarms == {("rejected", "run"), ("pairs_per_s", "history")}
    small = compare(synthetic(6, n=60, length=42.0), reference, [], MonitorPolicy())
    assert small.alarms == [] and any(r.value > r.threshold for r in small.rows if r.test == "psi")


def test_report_files_store_and_monitor_command(tmp_path: Path, reference: Profile) -> None:
    out = tmp_path / "scored"
    start = datetime.now(UTC) - timedelta(days=40)
    for i in range(4):  # one night 40 days ago (outside --since 30d), then three recent ones
        when = start if i == 0 else datetime.now(UTC) - timedelta(days=4 - i)
        store.save_traffic(synthetic(30 + i, run_id=f"run-{i}", created=when), out)
    store.save_traffic(synthetic(40, run_id="run-9", length=42.0), out)  # tonight: texts 3x longer
    store.save_reference(reference, out)
    assert [r.run_id for r in store.runs(out)] == ["run-0", "run-1", "run-2", "run-3", "run-9"]
    assert len(store.history(out, "m", "1", timedelta(days=30))) == 4
    assert len(store.history(out, "m", "1")) == 5
    assert [p.run_id for p in store.history(out, "m", "1", last=2)] == ["run-3", "run-9"]
    damaged = out / "_monitor" / "m" / "1" / "run-x" / "profile.json"
    damaged.parent.mkdir()
    damaged.write_text("{not json")
    assert len(store.history(out, "m", "1")) == 5  # skipped, named on stderr

    result = CliRunner().invoke(
        app, ["monitor", "--out", str(out), "--since", "30d", "--json", str(tmp_path / "m.json")]
    )
    assert result.exit_code == 0, result.output
    assert "| tokens | psi |" in result.output and "ALARM" in result.output
    assert "run-1" in result.output and "run-0" not in result.output  # listed: the runs since 30 days only
    run = out / "_monitor" / "m" / "1" / "run-9"
    for name in ("monitor.json", "monitor_reference.png", "monitor_history.png"):
        assert (run / name).stat().st_size > 1000 or name == "monitor.json"
    saved = json.loads((run / "monitor.json").read_text())
    assert saved["run_id"] == "run-9" and any(r["alarm"] for r in saved["rows"])
    assert json.loads((tmp_path / "m.json").read_text())["alarms"] >= 2

    strict = CliRunner().invoke(app, ["monitor", "--out", str(out), "--strict"])
    assert strict.exit_code == 3
    # the thresholds come from the nightly profile's monitor: block, as the night's own runs use them
    loose = tmp_path / "loose.yaml"
    smoke = yaml.safe_load(settings.shipped_path(Path("configs/nightly-smoke.yaml")).read_text())
    wide = {"tokens": 1e9, "rare": 1e9, "score": 1e9}
    shares = {"positive_rate_shift": 1.0, "truncated_shift": 1.0, "vector_auc": 1.0}
    health = {"truncated_rate": 1.0, "speed_drop": 1.0}
    smoke["monitor"] = {"psi": wide, "ks": dict.fromkeys(wide, 1.0), **shares, "health": health}
    loose.write_text(yaml.safe_dump(smoke))
    quiet = CliRunner().invoke(app, ["monitor", "--out", str(out), "--strict", "--profile", str(loose)])
    assert quiet.exit_code == 0, quiet.output
    missing = CliRunner().invoke(app, ["monitor", "--out", str(out), "--profile", str(tmp_path / "no.yaml")])
    assert missing.exit_code == 1 and "no.yaml" in missing.output
    bad = CliRunner().invoke(app, ["monitor", "--out", str(tmp_path), "--since", "soon"])
    assert bad.exit_code != 0
    empty = CliRunner().invoke(app, ["monitor", "--out", str(tmp_path)])
    assert empty.exit_code == 1


def test_write_report_markdown_names_the_alarm(tmp_path: Path, reference: Profile) -> None:
    traffic = synthetic(7, run_id="x", score_a=5.0)
    report = compare(traffic, reference, [], MonitorPolicy())
    paths = write_report(report, traffic, reference, [], tmp_path)
    assert [p.name for p in paths] == ["monitor.json", "monitor_reference.png", "monitor_history.png"]
    text = report.to_markdown()
    assert text.splitlines()[0].startswith("### Drift of run x") and "ALARM" in text
    assert any(
        a.describe().startswith("score psi ") and "> 0.25 against the reference" in a.describe()
        for a in report.alarms
    )
    figures = report.metrics()
    assert figures["alarms"] == len(report.alarms) and figures["score.psi.reference"] > 0.25


def test_binned_ks_is_exact_on_one_token_bins_and_psi_reads_zero_on_itself() -> None:
    from simpair.metrics.drift import ks_binned, psi

    rng = np.random.default_rng(9)
    x, y = rng.poisson(12, 3000), rng.poisson(13, 2000)
    hx, hy = Histogram.of("tokens").add(x), Histogram.of("tokens").add(y)
    grid = np.arange(0, 65)
    exact = np.max(np.abs((x[:, None] <= grid).mean(0) - (y[:, None] <= grid).mean(0)))
    d, p = ks_binned(hx.counts, hy.counts)
    assert d == pytest.approx(exact) and p < 1e-6
    assert psi(hx.counts, hx.counts) == 0.0 and psi(hx.counts, hy.counts) > 0.05


def test_a_small_batch_shows_meaning_drift_but_never_alarms_on_it(reference: Profile) -> None:
    small = synthetic(5, n=40, shift=1.5)  # a moved domain, but 40 pairs: the probe's AUC is noise here
    rows = [r for r in compare(small, reference, [], MonitorPolicy()).rows if r.statistic == "vectors"]
    assert rows and not any(r.alarm for r in rows)
    assert all("under 200 pairs" in r.note for r in rows if r.test == "classifier_auc")


def test_undefined_figures_round_trip_through_monitor_json(tmp_path: Path, reference: Profile) -> None:
    other = synthetic(6)
    other.histograms["tokens"] = Histogram(edges=[0.0, 1.0, 2.0], counts=[1, 3])  # other bins: NaN
    report = compare(other, reference, [], MonitorPolicy())
    assert any(np.isnan(r.value) for r in report.rows)
    again = type(report).model_validate_json(report.to_json())
    assert [np.isnan(r.value) for r in again.rows] == [np.isnan(r.value) for r in report.rows]


def test_a_damaged_vector_file_is_a_damaged_profile_that_history_skips(tmp_path: Path) -> None:
    out = tmp_path / "scored"
    for i in range(2):
        store.save_traffic(synthetic(30 + i, run_id=f"run-{i}"), out)
    vectors = next((out / "_monitor" / "m" / "1" / "run-0").glob("*.npy"))
    vectors.write_bytes(b"\x93NUMPY broken")
    with pytest.raises(ValueError, match="not a readable monitoring profile"):
        Profile.load(vectors.parent)
    assert [p.run_id for p in store.history(out, "m", "1")] == ["run-1"]


def test_a_monitoring_fault_becomes_the_runs_note_never_its_failure(tmp_path: Path) -> None:
    from simpair.monitoring.traffic import profile_traffic
    from simpair.runtime.model_ref import ModelRef

    part = tmp_path / "scored" / "chunk-0"
    part.mkdir(parents=True)
    (part / "profile.json").write_text("{damaged")  # a chunk's partial cut short on a full disk
    model = ModelRef("m", "1", "", str(tmp_path / "model"), "paraphrase", "cross")
    outcome = profile_traffic(tmp_path / "scored", "run-1", model, [str(part)], {}, MonitorPolicy())
    assert outcome.alarms == 0 and outcome.note and outcome.note.startswith("drift not checked: ValueError")
