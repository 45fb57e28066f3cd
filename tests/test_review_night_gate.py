"""The gate's traffic check, pure: paired intervals on reviewed pairs, `report` against `required`, the
minimum of reviewed pairs, and where a reviewed task's training data and protected splits come from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simpair.metrics.binary_classification import binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.metrics.paired_interval import figure, paired_figures
from simpair.selection.gate import GatePolicy, TrafficCheck, decide, resolve_traffic_metric


def write_reviews(home: Path, dataset: str, train: int, traffic: int) -> None:
    """A version of a reviews dataset in the catalog layout, `train` and `traffic` rows of made-up pairs."""
    import polars as pl

    from simpair.schema import PAIR_SCHEMA

    version = f"v{train}-{traffic}"
    folder = home / "datasets" / dataset / version
    folder.mkdir(parents=True)
    for split, n in (("train", train), ("traffic", traffic)):
        rows = {
            "pair_id": [f"{split}{i}" for i in range(n)], "text_a": [f"a {split} {i}" for i in range(n)],
            "text_b": [f"b {split} {i}" for i in range(n)], "label": [i % 2 for i in range(n)],
            "score": [None] * n, "score_raw": [None] * n, "split": [split] * n, "dataset": [dataset] * n,
            "dataset_version": [version] * n, "source_file": ["import.json"] * n, "source_sha256": [""] * n,
            "source_line": list(range(n)),
        }  # fmt: skip
        pl.DataFrame(rows, schema=pl.Schema(PAIR_SCHEMA)).write_parquet(folder / f"{split}.parquet")
    splits = [{"split": "train", "role": "train"}, {"split": "traffic", "role": "test"}]
    (folder / "manifest.json").write_text(json.dumps({"dataset": dataset, "splits": splits}))
    (home / "datasets" / dataset / "CURRENT").write_text(version)


def _check(delta_low: float, delta_high: float, pairs: int = 200, mode: str = "required") -> TrafficCheck:
    return TrafficCheck(
        label="reviews/traffic", metric="f1", pairs=pairs, challenger=0.70, challenger_low=0.62,
        challenger_high=0.78, reference=0.80, reference_name="champion v1",
        delta=(delta_low + delta_high) / 2,
        delta_low=delta_low, delta_high=delta_high, mode=mode, min_pairs=50,
    )  # fmt: skip


def test_figures_agree_with_the_metric_functions_and_the_interval_covers_the_point() -> None:
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 300)
    model = np.clip(gold * 0.6 + rng.normal(0.2, 0.25, 300), 0, 1)
    reference = np.clip(gold * 0.2 + rng.normal(0.4, 0.25, 300), 0, 1)
    expected = binary_metrics(model, gold, 0.5)
    for name in ("accuracy", "f1", "roc_auc"):
        assert figure(name, model, gold, 0.5) == pytest.approx(expected[name], abs=1e-12)
    graded = rng.uniform(0, 5, 100)
    noisy = graded + rng.normal(0, 1, 100)
    assert figure("spearman", noisy, graded) == pytest.approx(
        graded_metrics(noisy, graded)["spearman"], abs=1e-9
    )

    better = paired_figures("roc_auc", gold, model, reference)
    assert better.n == 300 and better.model_low <= better.model <= better.model_high
    assert better.delta_low > 0  # clearly better: the whole interval of the difference above 0
    same = paired_figures("f1", gold, model, model, 0.5, 0.5)
    assert same.delta == same.delta_low == same.delta_high == 0.0
    worse = paired_figures("f1", gold, reference, model, 0.5, 0.5)
    assert worse.delta_high < 0


def test_required_rejects_only_a_challenger_clearly_worse_on_the_traffic() -> None:
    policy = GatePolicy(primary="f1", margin=0.0, traffic="required")
    won = {"msrp/test/f1": 0.90}
    lost = decide(policy, "2", won, "1", {"msrp/test/f1": 0.80}, traffic=_check(-0.15, -0.04))
    assert not lost.promote
    assert (
        "worse there (the whole interval is below 0)" in lost.reason and "In-domain: f1 0.9000" in lost.reason
    )
    assert lost.tags()["gate.traffic.result"] == "fail"
    noise = decide(policy, "2", won, "1", {"msrp/test/f1": 0.80}, traffic=_check(-0.15, 0.02))
    assert noise.promote and "not clearly worse" in noise.reason
    few = decide(policy, "2", won, "1", {"msrp/test/f1": 0.80}, traffic=_check(-0.15, -0.04, pairs=20))
    assert few.promote
    assert "reported, not judged: fewer than 50 reviewed pairs" in few.reason
    assert "reported, not judged: fewer than 50" in few.to_markdown("simpair-paraphrase")
    reported = decide(
        GatePolicy(primary="f1", margin=0.0), "2", won, "1", {"msrp/test/f1": 0.80},
        traffic=_check(-0.15, -0.04, mode="report"),
    )  # fmt: skip
    assert reported.promote and "(reported)" in reported.reason
    page = reported.to_markdown("simpair-paraphrase")
    assert "Accuracy on your traffic (reviews/traffic" in page
    assert "| 200 | 0.7000 (0.6200 to 0.7800) | 0.8000 | -0.0950 (-0.1500 to -0.0400) |" in page
    assert reported.tags()["gate.traffic.pairs"] == "200"


def test_traffic_metric_follows_the_label_kind() -> None:
    assert resolve_traffic_metric("paraphrase", "f1", binary=True) == "f1"
    assert resolve_traffic_metric("paraphrase", "f1", binary=False) == "spearman"
    assert resolve_traffic_metric("sts", "spearman", binary=True) == "roc_auc"
    assert resolve_traffic_metric("sts", "spearman", binary=True, chosen="roc_auc") == "roc_auc"
    with pytest.raises(ValueError, match="traffic"):
        GatePolicy(primary="f1", traffic="always")  # type: ignore[arg-type]


def test_reviews_join_training_and_protect_the_traffic_only_when_they_exist(tmp_path: Path) -> None:
    from simpair.settings import PROJECT_ROOT
    from simpair.training import TrainConfig
    from simpair.training.reviews import ReviewUse, traffic_split, with_reviews

    config = TrainConfig.from_yaml(PROJECT_ROOT / "configs" / "smoke-paraphrase.yaml")
    use = ReviewUse(repeat=3)
    assert (
        with_reviews(config, tmp_path, use) is config and traffic_split(tmp_path, "paraphrase", use) is None
    )
    write_reviews(tmp_path, "reviews", train=4, traffic=0)
    grown = with_reviews(config, tmp_path, use)
    assert [(r.label(), r.repeat) for r in grown.train] == [("msrp/train", 1), ("reviews/train", 3)]
    assert grown.evaluate_on == config.evaluate_on  # no reviewed traffic yet: nothing to protect
    write_reviews(tmp_path, "reviews", train=4, traffic=3)
    grown = with_reviews(config, tmp_path, use)
    assert [r.label() for r in grown.evaluate_on] == ["msrp/test", "reviews/traffic"]
    assert traffic_split(tmp_path, "paraphrase", use) == ("reviews", "traffic")
    assert traffic_split(tmp_path, "paraphrase", ReviewUse(traffic_split=False)) is None
    assert with_reviews(config, tmp_path, ReviewUse(train=False)).train == config.train


def test_traffic_figures_read_each_side_from_its_own_columns() -> None:
    import polars as pl

    from simpair.evaluation.common_set import Evaluation
    from simpair.evaluation.traffic import traffic_figures
    from simpair.metrics.paired_interval import figure

    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 120)
    mine = rng.random(120) * 0.5 + gold * 0.3  # the challenger: scores only, no calibration
    theirs = rng.random(120)  # the champion: a calibrated probability beside an unrelated score
    ids = [f"p{i}" for i in range(120)]
    challenger = Evaluation(
        {}, scored={"traffic": pl.DataFrame({"pair_id": ids, "score": mine, "gold_label": gold})}
    )
    champion = Evaluation(
        {}, scored={"traffic": pl.DataFrame({"pair_id": ids, "score": 1 - theirs, "probability": theirs})}
    )
    f = traffic_figures("traffic", "roc_auc", challenger, champion)
    assert f.model == pytest.approx(figure("roc_auc", mine, gold))
    assert f.reference == pytest.approx(figure("roc_auc", theirs, gold))
