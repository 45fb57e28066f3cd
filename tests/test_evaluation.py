"""Evaluation: thresholds from dev only, metrics against sklearn/scipy, leakage exclusion, report files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_training_toydata import write_toy_home
from typer.testing import CliRunner

from simpair.evaluation import (
    BinaryClassificationEvaluator,
    GradedSimilarityEvaluator,
    best_threshold,
    binary_metrics,
)
from simpair.evaluation.splits import evaluate_model
from simpair.models import save_tiny_model
from simpair.runtime.loader import load_predictor
from simpair.training import TrainConfig, train

# Tiny models run fastest on one thread, and the machine is shared: no oversubscription.
pytestmark = pytest.mark.usefixtures("one_thread")


def test_best_threshold_matches_a_brute_force_sweep() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 80)
    scores = np.clip(labels * 0.3 + rng.normal(0.4, 0.2, 80), 0, 1)
    for metric in ("accuracy", "f1"):
        t = best_threshold(scores, labels, metric)
        got = binary_metrics(scores, labels, t)[metric]
        brute = max(binary_metrics(scores, labels, c)[metric] for c in np.unique(scores))
        assert got == pytest.approx(brute)


def test_binary_metrics_agree_with_the_confusion_matrix() -> None:
    m = binary_metrics(np.array([0.9, 0.8, 0.2, 0.6, 0.1]), np.array([1, 0, 0, 1, 1]), 0.5)
    assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (2, 1, 1, 1)
    assert m["accuracy"] == pytest.approx(0.6) and m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 3) and 0 <= m["roc_auc"] <= 1


def test_evaluators_pick_thresholds_on_dev_and_apply_them_unchanged(tmp_path: Path) -> None:
    pred = load_predictor(save_tiny_model(tmp_path / "m", kind="bi"))
    a = ["a cat sat", "dogs bark", "the sun is hot", "rain falls"]
    b = ["a cat is sitting", "the market fell", "it is hot in the sun", "stocks rose"]
    dev = BinaryClassificationEvaluator(a, b, [1, 0, 1, 0])
    dev_metrics = dev(pred)
    test = BinaryClassificationEvaluator(b, a, [1, 0, 1, 0], threshold=dev_metrics["threshold"])
    assert test(pred)["threshold"] == dev_metrics["threshold"]
    graded = GradedSimilarityEvaluator(a, b, [0.9, 0.1, 0.8, 0.0])(pred)
    assert set(graded) >= {"spearman", "pearson", "mse", "mae"}


def test_evaluate_model_excludes_leaked_pairs_and_writes_report(home: Path, tmp_path: Path) -> None:
    write_toy_home(home)
    # Trained on stsb/train WITHOUT protecting msrp/test: its 2 leaked msrp-test pairs must be excluded.
    cfg = TrainConfig(
        name="sts-bi",
        task="sts",
        kind="bi",
        objective="cosent",
        backbone="tiny",
        train=[{"dataset": "stsb", "split": "train"}],
        dev={"split": "dev"},
        max_length=48,
        epochs=1,
        batch_size=8,
        learning_rate=1e-3,
        progress=False,
        num_threads=1,
    )
    model_dir = train(cfg, home).model_dir
    out = tmp_path / "eval"
    result = evaluate_model(model_dir, home, [("msrp", "test"), ("stsb", "test")], out_dir=out)
    assert result.excluded_counts == {"msrp/test": 2, "stsb/test": 0}
    msrp = result.metrics["splits"]["msrp/test"]
    assert msrp["evaluated"] == 22 and msrp["excluded_leaked"] == 2
    assert {"accuracy", "f1", "precision", "recall", "roc_auc"} <= set(msrp)
    assert msrp["threshold"] == load_predictor(model_dir).threshold  # applied, never re-tuned on test
    stsb = result.metrics["splits"]["stsb/test"]
    assert {"spearman", "pearson", "mse", "mae"} <= set(stsb)
    names = {p.name for p in result.plot_paths}
    assert {"msrp-test-confusion.png", "msrp-test-histogram.png", "stsb-test-scatter.png"} <= names
    for plot in result.plot_paths:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "metrics.json").read_text())["splits"]["msrp/test"]["excluded_leaked"] == 2
    report = result.report_path.read_text()
    assert "| msrp/test | 22 | 2 |" in report and "msrp-test-confusion.png" in report

    # Opting out keeps every pair; the cached-token path equals the predictor on raw texts.
    kept = evaluate_model(model_dir, home, [("msrp", "test")], exclude_leaked=False, out_dir=tmp_path / "e2")
    assert kept.metrics["splits"]["msrp/test"]["evaluated"] == 24
    import polars as pl

    from simpair.catalog import Catalog

    preds = pl.read_parquet(kept.predictions_paths[0])
    frame = Catalog(home).read_split("msrp", "test")
    direct = load_predictor(model_dir).predict(frame["text_a"].to_list(), frame["text_b"].to_list())
    np.testing.assert_allclose(preds["score"].to_numpy(), direct["score"], atol=1e-5)


def test_cli_train_evaluate_predict(home: Path, tmp_path: Path) -> None:
    from simpair.cli import app

    write_toy_home(home)
    runner = CliRunner()
    repo = Path(__file__).resolve().parents[1]
    res = runner.invoke(
        app,
        [
            "train",
            "--config",
            str(repo / "configs" / "smoke-paraphrase.yaml"),
            "--home",
            str(home),
            "--set",
            "num_threads=1",
            "--set",
            "progress=false",
            "--json",
            "-",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "model:" in res.stderr and "msrp/test" in res.stderr  # what a person reads
    trained = json.loads(res.stdout)  # stdout holds the JSON only, epoch lines included elsewhere
    assert "msrp/test" in trained["evaluation"]["metrics"]["splits"]
    model = trained["model_dir"]  # passed on: the default model is the champion
    res = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            model,
            "--home",
            str(home),
            "--split",
            "msrp/test",
            "--out",
            str(tmp_path / "ev"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ev" / "report.md").exists()
    said = [
        "predict",
        "A cat sat.",
        "A cat was sitting.",
        "--model",
        model,
        "--home",
        str(home),
        "--json",
        "-",
    ]
    res = runner.invoke(app, said)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # stdout holds the JSON only
    assert 0 <= out["probability"] <= 1 and out["label"] in (0, 1) and out["truncated"] is False
    bad = runner.invoke(
        app, ["train", "--config", str(repo / "configs" / "smoke-paraphrase.yaml"), "--set", "epochz=1"]
    )
    assert bad.exit_code != 0 and "epochz" in bad.output


def test_metrics_per_group_of_pair_ids_match_a_recomputation(home: Path, tmp_path: Path) -> None:
    """Toy ids run stsb-test-0000 .. -0023: groups "0" (ids 0-9), "1" (10-19), the rest unmatched."""
    import polars as pl
    from scipy.stats import spearmanr

    from simpair.catalog import Catalog
    from simpair.cli import app

    write_toy_home(home)
    pattern = r"-00([01])\d$"
    for task, kind, dataset in (("sts", "bi", "stsb"), ("paraphrase", "cross", "msrp")):
        model_dir = save_tiny_model(tmp_path / f"tiny-{kind}", task=task, kind=kind, seed=3)
        ev = evaluate_model(
            model_dir, home, [(dataset, "test")], out_dir=tmp_path / kind, group_pattern=pattern
        )
        split = ev.metrics["splits"][f"{dataset}/test"]
        groups = split["by_group"]
        assert list(groups) == ["0", "1", "(unmatched)"]
        assert [g["evaluated"] for g in groups.values()] == [10, 10, 4]
        assert sum(g["evaluated"] for g in groups.values()) == split["evaluated"]

        preds = pl.read_parquet(ev.predictions_paths[0])
        gold = Catalog(home).read_split(dataset, "test").select("pair_id", "label", "score")
        joined = preds.join(gold, on="pair_id")
        number = joined["pair_id"].str.slice(-4).cast(pl.Int64)
        for name, lo, hi in (("0", 0, 9), ("1", 10, 19), ("(unmatched)", 20, 23)):
            part = joined.filter((number >= lo) & (number <= hi))
            if task == "sts":
                want = spearmanr(part["score"].to_numpy(), part["score_right"].to_numpy()).statistic
                assert groups[name]["spearman"] == pytest.approx(want, abs=1e-9)
            else:
                want = float((part["label"].to_numpy() == part["label_right"].to_numpy()).mean())
                assert groups[name]["accuracy"] == pytest.approx(want, abs=1e-9)
                assert groups[name]["threshold"] == split["threshold"]  # the dev threshold, not re-tuned
        assert f"### {dataset}/test by group" in ev.report_path.read_text()

    for bad, message in (("-00[01]", "needs a capture group"), ("(", "not a valid regular expression")):
        with pytest.raises(ValueError, match=message):
            evaluate_model(model_dir, home, [("msrp", "test")], out_dir=tmp_path / "bad", group_pattern=bad)
    runner = CliRunner()
    args = ["evaluate", "--model", str(model_dir), "--home", str(home), "--split", "msrp/test"]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "cli"), "--group-pattern", pattern])
    assert res.exit_code == 0, res.output
    assert "(unmatched)" in res.output
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "cli-bad"), "--group-pattern", "("])
    assert res.exit_code == 2 and "--group-pattern" in res.output  # a usage error naming the option


def test_scatter_plots_a_bounded_seeded_sample_and_histograms_draw_bins_not_points(tmp_path: Path) -> None:
    from simpair.evaluation.plots import SCATTER_POINTS, histogram_png, scatter_figure

    rng = np.random.default_rng(1)
    gold, predicted = rng.random(200_000), rng.random(200_000).astype(np.float32)
    fig = scatter_figure(predicted, gold, "big split")
    offsets = fig.axes[0].collections[0].get_offsets()
    assert len(offsets) == SCATTER_POINTS  # the figure's cost does not grow with the split
    assert "20,000 of 200,000 pairs" in fig.axes[0].get_title()
    again = scatter_figure(predicted, gold, "big split").axes[0].collections[0].get_offsets()
    assert np.array_equal(offsets, again)  # seeded: the same split gives the same picture
    small = scatter_figure(predicted[:500], gold[:500], "small split").axes[0].collections[0]
    assert len(small.get_offsets()) == 500 and small.axes.get_title() == "small split"
    png = histogram_png(
        predicted, (gold > 0.5).astype(np.int64), {0: "no", 1: "yes"}, tmp_path / "h.png", "h"
    )
    assert png.stat().st_size > 0
