"""`simpair evaluate --file`: a model on a user's own labelled pairs, beside the zero-shot backbone.

Tiny random models (backbone `tiny-random-bert`, whose zero-shot twin is the seeded tiny bi-encoder), so
the figures themselves are noise: the tests check what is computed, written, dropped and reported.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score
from test_training_toydata import write_toy_home
from typer.testing import CliRunner

from simpair.catalog import Catalog
from simpair.evaluation.file import FileEvalError, evaluate_file
from simpair.evaluation.file.validate import validate_pairs
from simpair.metrics.bootstrap import _headline, verdict_line
from simpair.models import ModelMetadata, save_tiny_model
from simpair.runtime.loader import load_predictor

pytestmark = pytest.mark.usefixtures("one_thread")

SENTENCES = [
    ("A cat sat on the mat.", "A cat was sitting on the mat."),
    ("The stock market fell sharply today.", "Shares dropped steeply on Monday."),
    ("He plays the guitar.", "The weather is cold."),
    ("She is reading a book.", "A woman reads a novel."),
    ("Dogs bark at night.", "The committee approved the budget."),
    ("The train was late.", "The train arrived behind schedule."),
    ("I like green tea.", "Green tea is what I enjoy."),
    ("The river flooded the town.", "A man is cooking pasta."),
    ("Kids play football outside.", "Children are playing soccer outdoors."),
    ("The phone battery died.", "Mountains are tall."),
    ("They bought a new car.", "A new car was purchased by them."),
    ("The museum opens at nine.", "Birds migrate in winter."),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        "sts": save_tiny_model(root / "tiny-sts-cross", task="sts", kind="cross", seed=1),
        "paraphrase": save_tiny_model(root / "tiny-para-bi", task="paraphrase", kind="bi", seed=2),
    }


def graded_file(path: Path, bad_rows: bool = False) -> Path:
    """Grades on 0-5 (the STS-B scale), plus rows that must be dropped when asked."""
    grades = [4.8, 3.6, 0.2, 3.9, 0.0, 4.5, 4.2, 0.4, 4.0, 0.1, 5.0, 0.3]
    rows = [(a, b, g) for (a, b), g in zip(SENTENCES, grades, strict=True)]
    if bad_rows:
        rows += [
            (None, "A lone text.", 2.0),
            ("   ", "Blank first text.", 1.0),
            ("Fine text.", "Too high.", 7.5),
        ]
    pl.DataFrame(rows, schema=["text_a", "text_b", "score"], orient="row").write_parquet(path)
    return path


def test_graded_file_on_a_0_5_range_reports_model_and_zero_shot(
    models: dict[str, Path], home: Path, tmp_path: Path
) -> None:
    path = graded_file(tmp_path / "mine.parquet", bad_rows=True)
    result = evaluate_file(models["sts"], path, "graded", score_range=(0, 5), home=home)

    m = result.metrics
    assert m["rows_read"] == 15 and m["evaluated"] == 12
    assert m["dropped"] == {"blank_text": 1, "label_out_of_range": 1, "null_text": 1}
    for key in ("spearman", "pearson", "mse", "mae"):
        assert np.isfinite(m["model_metrics"][key])
    assert set(m["zero_shot"]["metrics"]) >= {"spearman", "pearson"}
    assert m["deltas"]["spearman"] == pytest.approx(
        m["model_metrics"]["spearman"] - m["zero_shot"]["metrics"]["spearman"]
    )
    # written where promised: report, metrics, plots for both, predictions with both scores, drops
    assert result.out_dir.parent == home / "evaluations" and result.out_dir.name.startswith("file-mine-")
    assert json.loads((result.out_dir / "metrics.json").read_text())["verdict"] == result.verdict
    names = {p.name for p in result.plot_paths}
    assert names == {
        "model-scatter.png",
        "model-histogram.png",
        "zero-shot-scatter.png",
        "zero-shot-histogram.png",
    }
    assert all(p.stat().st_size > 0 for p in result.plot_paths)
    report = result.report_path.read_text()
    assert result.verdict in report and "| spearman |" in report and "rescaled from 0-5 to 0-1" in report
    preds = pl.read_parquet(result.predictions_path)
    assert preds["row"].to_list() == list(range(12))
    np.testing.assert_allclose(preds["gold_01"].to_numpy(), preds["gold"].to_numpy() / 5)
    direct = load_predictor(models["sts"]).predict(preds["text_a"].to_list(), preds["text_b"].to_list())
    np.testing.assert_allclose(preds["model_score"].to_numpy(), direct["score"], atol=1e-5)
    assert preds["zero_shot_cosine"].null_count() == 0
    drops = pl.read_parquet(result.out_dir / "dropped.parquet")
    assert drops.select("row", "reason", "column").rows() == [
        (12, "null_text", "text_a"),
        (13, "blank_text", "text_a"),
        (14, "label_out_of_range", "score"),
    ]


def test_binary_file_applies_the_models_own_threshold(
    models: dict[str, Path], home: Path, tmp_path: Path
) -> None:
    labels = [1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0]
    rows = [(f"p{i}", a, b, lab) for i, ((a, b), lab) in enumerate(zip(SENTENCES, labels, strict=True))]
    rows.append(("p-bad", "Some text.", "Other text.", 2))
    path = tmp_path / "mine.csv"
    pl.DataFrame(rows, schema=["pair_id", "text_a", "text_b", "label"], orient="row").write_csv(path)
    out = tmp_path / "ev"
    result = evaluate_file(models["paraphrase"], path, "binary", home=home, out_dir=out)

    m = result.metrics
    assert m["threshold"] == 0.5 and m["model_metrics"]["threshold"] == 0.5
    assert m["dropped"] == {"label_not_binary": 1}
    for key in ("accuracy", "f1", "precision", "recall", "roc_auc"):
        assert 0.0 <= m["model_metrics"][key] <= 1.0
    score = load_predictor(models["paraphrase"]).predict(
        [a for a, _ in SENTENCES], [b for _, b in SENTENCES]
    )["probability"]
    expected = float(np.mean((score >= 0.5).astype(int) == np.array(labels)))
    assert m["model_metrics"]["accuracy"] == pytest.approx(expected)
    # no ingested training data in this home: the zero-shot baseline gets no threshold, only ROC-AUC
    zs = m["zero_shot"]
    assert zs["threshold"] is None and set(zs["metrics"]) == {"roc_auc", "n", "threshold"}
    assert "roc_auc" in m["deltas"] and "accuracy" not in m["deltas"]
    assert {p.name for p in result.plot_paths} == {
        "model-confusion.png",
        "model-histogram.png",
        "zero-shot-histogram.png",
    }
    assert pl.read_parquet(result.predictions_path)["pair_id"].to_list() == [f"p{i}" for i in range(12)]


def test_ingested_training_data_sets_the_zero_shot_threshold_and_excludes_trained_pairs(
    models: dict[str, Path], home: Path, tmp_path: Path
) -> None:
    """As the gate does: the baseline's threshold comes from the model's training split, never the file;
    pairs the model was trained on (swapped or spaced differently) are excluded, or kept and counted."""
    write_toy_home(home, n_train=24, n_eval=8)
    model = tmp_path / "trained-on-msrp"
    save_tiny_model(model, task="paraphrase", kind="bi", seed=2)
    meta = ModelMetadata.read(model)
    meta.train_datasets = ["msrp/train", "elsewhere/train"]
    meta.write(model)
    trained = Catalog(home).read_split("msrp", "train").head(2)
    (a0, b0), (a1, b1) = trained.select("text_a", "text_b").rows()
    seen = [(b0, a0, 1), (f"  {a1}", f"{b1}   ", 0)]  # the same pairs as ingest's identity sees them
    labels = [1, 0] * 6
    rows = [(a, b, lab) for (a, b), lab in zip(SENTENCES, labels, strict=True)] + seen
    path = tmp_path / "mine.parquet"
    pl.DataFrame(rows, schema=["text_a", "text_b", "label"], orient="row").write_parquet(path)
    result = evaluate_file(model, path, "binary", home=home, out_dir=tmp_path / "ev")

    m = result.metrics
    assert m["evaluated"] == 12 and m["dropped"] == {"in_training_data": 2}
    assert m["training_overlap"] == {
        "found": 2,
        "excluded": True,
        "checked": ["msrp/train"],
        "not_checked": ["elsewhere/train"],
    }
    assert pl.read_parquet(result.out_dir / "dropped.parquet")["row"].to_list() == [12, 13]
    assert "not checked against training data: elsewhere/train" in result.report_path.read_text()
    zs = m["zero_shot"]
    assert zs["threshold"] is not None and zs["threshold_source"].startswith("msrp/train@")
    assert {"accuracy", "f1", "roc_auc"} <= set(zs["metrics"]) and "accuracy" in m["deltas"]
    preds = pl.read_parquet(result.predictions_path)
    gold = np.array(labels)
    cut = (preds["zero_shot_score"].to_numpy() >= zs["threshold"]).astype(int)
    assert zs["metrics"]["accuracy"] == pytest.approx(float(np.mean(cut == gold)))
    assert zs["metrics"]["roc_auc"] == pytest.approx(
        roc_auc_score(gold, preds["zero_shot_cosine"].to_numpy())
    )
    assert "zero-shot-confusion.png" in {p.name for p in result.plot_paths}

    kept = evaluate_file(
        model, path, "binary", home=home, out_dir=tmp_path / "kept", zero_shot=False, exclude_trained=False
    )
    assert kept.metrics["evaluated"] == 14 and kept.metrics["dropped"] == {}
    assert kept.metrics["training_overlap"]["found"] == 2 and kept.metrics["zero_shot"] is None
    assert kept.verdict.startswith("model roc_auc") and "kept" in kept.report_path.read_text()


def test_a_stacked_model_scores_from_texts_and_keeps_its_backbones_baseline(
    models: dict[str, Path], home: Path, tmp_path: Path
) -> None:
    """A stack has no tokenizer of its own: its members score the texts; the baseline is its backbone."""
    from simpair.models.composite import StackSpec

    stack = tmp_path / "stack"
    save_tiny_model(stack / "m0", task="sts", kind="bi", seed=3)
    save_tiny_model(stack / "m1", task="sts", kind="cross", seed=4)
    ModelMetadata(kind="stacked", task="sts", objective="stack", backbone="tiny-random-bert").write(stack)
    StackSpec(
        combiner="ridge",
        members=["m0", "m1"],
        features=["member:0", "member:1"],
        mean=[0.0, 0.0],
        scale=[1.0, 1.0],
        coef=[0.5, 0.5],
        intercept=0.25,
        regularisation=1.0,
    ).write(stack)
    path = graded_file(tmp_path / "mine.parquet")
    result = evaluate_file(stack, path, "graded", score_range=(0, 5), home=home, out_dir=tmp_path / "ev")

    assert result.metrics["kind"] == "stacked" and np.isfinite(result.metrics["model_metrics"]["spearman"])
    assert result.metrics["zero_shot"]["backbone"] == "tiny-random-bert"
    preds = pl.read_parquet(result.predictions_path)
    direct = load_predictor(stack).predict(preds["text_a"].to_list(), preds["text_b"].to_list())
    np.testing.assert_allclose(preds["model_score"].to_numpy(), direct["score"], atol=1e-5)


def test_bad_files_fail_with_an_error_naming_the_file_and_column(
    models: dict[str, Path], home: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.parquet"
    with pytest.raises(FileEvalError, match="nope.parquet: no such file"):
        evaluate_file(models["sts"], missing, "graded", home=home)
    path = tmp_path / "cols.parquet"
    pl.DataFrame({"text_a": ["a"], "text_b": ["b"], "grade": [3.0]}).write_parquet(path)
    with pytest.raises(FileEvalError, match=r"cols.parquet: missing column 'score'.*--label-column"):
        evaluate_file(models["sts"], path, "graded", home=home)
    with pytest.raises(FileEvalError, match="missing column 'label'") as err:
        evaluate_file(models["sts"], path, "binary", label_column="label", home=home)
    assert err.value.option == "--label-column"
    scaled = graded_file(tmp_path / "scaled.parquet")
    with pytest.raises(FileEvalError, match=r"spans 0 to 5, not 0-1.*--range 0 5") as err:
        evaluate_file(models["sts"], scaled, "graded", home=home)
    assert err.value.option == "--range"
    blank = tmp_path / "blank.parquet"
    pl.DataFrame({"text_a": [" ", None], "text_b": ["x", "y"], "score": [0.5, 0.5]}).write_parquet(blank)
    with pytest.raises(FileEvalError, match=r"none of its 2 rows.*1 blank_text, 1 null_text"):
        evaluate_file(models["sts"], blank, "graded", home=home)


def test_every_unusable_row_is_dropped_under_its_reason_with_the_cell_as_written() -> None:
    frame = pl.DataFrame(
        {
            "text_a": [b"fine", b"\xff\xfe", b"fine", b"fine", b"fine", b"fine", b"fine"],
            "text_b": ["ok", "ok", "\t ", "ok", "ok", "ok", "ok"],
            "label": ["1", "0", "1", None, "yes", "nan", "2"],
        }
    )
    data = validate_pairs(frame, Path("mine.parquet"), "binary")
    assert data.rows.tolist() == [0] and data.gold.tolist() == [1] and data.rows_read == 7
    assert data.drops.rows() == [
        (1, "non_utf8", "text_a", "b'\\xff\\xfe'"),
        (2, "blank_text", "text_b", "\t "),
        (3, "label_missing", "label", None),
        (4, "label_not_numeric", "label", "yes"),
        (5, "label_not_numeric", "label", "nan"),
        (6, "label_not_binary", "label", "2"),
    ]
    assert sum(data.dropped.values()) == 6 and data.dropped["label_not_numeric"] == 2


def test_verdict_says_helped_only_when_the_interval_clears_zero() -> None:
    assert verdict_line("spearman", 0.81, 0.77, (0.02, 0.06), 500).startswith(
        "fine-tuning helped on this file: spearman 0.81 vs zero-shot 0.77 (+0.04"
    )
    assert verdict_line("spearman", 0.70, 0.77, (-0.1, -0.03), 500).startswith("fine-tuning hurt")
    assert verdict_line("spearman", 0.78, 0.77, (-0.02, 0.04), 500).startswith("no clear difference")
    assert verdict_line("spearman", 0.88, 0.88, (1e-9, 2e-9), 300).startswith("no clear difference")
    assert verdict_line("roc_auc", float("nan"), 0.5, None, 3).startswith("no verdict")
    rng = np.random.default_rng(1)
    gold, score = rng.integers(0, 2, 40), np.round(rng.random(40), 1)  # ties, as real scores have
    assert _headline("binary", score, gold) == pytest.approx(roc_auc_score(gold, score))
    grades = np.round(rng.random(40), 1)
    assert _headline("graded", score, grades) == pytest.approx(spearmanr(score, grades).statistic)


def test_cli_evaluate_file_prints_both_figures(models: dict[str, Path], home: Path, tmp_path: Path) -> None:
    from simpair.cli import app

    path = graded_file(tmp_path / "mine.tsv.parquet")
    tsv = tmp_path / "mine.tsv"
    pl.read_parquet(path).write_csv(tsv, separator="\t")
    runner = CliRunner()
    args = ["evaluate", "--home", str(home), "--model", str(models["sts"]), "--file", str(tsv)]
    res = runner.invoke(
        app, [*args, "--label-kind", "graded", "--range", "0", "5", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    model_sp = f"{metrics['model_metrics']['spearman']:.4f}"
    zero_sp = f"{metrics['zero_shot']['metrics']['spearman']:.4f}"
    line = next(line for line in res.output.splitlines() if "spearman" in line and "│" in line)
    assert model_sp in line and zero_sp in line
    assert "report:" in res.output and metrics["verdict"][:20] in res.output.replace("\n", " ")

    clash = runner.invoke(app, [*args, "--split", "msrp/test"])
    assert clash.exit_code == 2 and "--split" in clash.output
    stray = runner.invoke(app, ["evaluate", "--home", str(home), "--range", "0", "5"])
    assert stray.exit_code == 2 and "only apply with --file" in stray.output
    missing = runner.invoke(app, [*args[:-1], str(tmp_path / "absent.parquet")])
    assert missing.exit_code == 2 and "absent.parquet:nosuchfile" in _unboxed(missing.output)


def _unboxed(output: str) -> str:
    """The error box's text without its frame and wrapping (rich folds long paths at any width)."""
    return "".join(ch for ch in output if ch not in "│╭╮╰╯─ \n")
