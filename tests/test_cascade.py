"""The bi -> cross cascade on tiny real BERTs: band fitting, the row-level stage marker, loading through
`load_predictor`, bulk scoring through the runtime (store, int8 in the bi stage), pyfunc, and resume
after SIGKILL with identical scores."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow_store import seed_store
from registry_helpers import one_torch_thread  # noqa: F401 - fixture
from test_scoring_crash import _cmd, _wait_chunks
from test_scoring_support import assert_exactly_once, make_pairs, read_outputs, write_batch
from test_training_toydata import write_toy_home

from simpair.ensemble import StackConfig, compare_with_cross
from simpair.ensemble.cascade_band import allowed_misses, fit_band
from simpair.ensemble.train import train_stack_file
from simpair.models import save_tiny_model
from simpair.models.composite import CascadeSpec
from simpair.models.metadata import Calibration, ModelMetadata
from simpair.registry.pyfunc import log_pyfunc
from simpair.runtime.cascade import in_band
from simpair.runtime.loader import load_predictor
from simpair.scoring import score_inbox

pytestmark = pytest.mark.usefixtures("one_torch_thread")
WIDTH_ZERO, FULL = (0.5, 0.5), (-1.0, 2.0)


def write_tiny_cascade(root: Path, band: tuple[float, float]) -> Path:
    """A `kind: cascade` directory written by hand: a calibrated tiny bi-encoder, a tiny cross-encoder."""
    members = ["members/0-bi", "members/1-cross"]
    bi = save_tiny_model(root / members[0], task="paraphrase", kind="bi", seed=4)
    meta = ModelMetadata.read(bi)
    meta.calibration = Calibration(a=8.0, b=-6.0)  # tiny cosines sit near 0.7-1: spread them over 0-1
    meta.write(bi)
    save_tiny_model(root / members[1], task="paraphrase", kind="cross", seed=3)
    CascadeSpec(members=members, band_low=band[0], band_high=band[1]).write(root)
    ModelMetadata(kind="cascade", task="paraphrase", objective="cascade", backbone="tiny").write(root)
    return root


def _band_in_the_middle(tmp_path: Path, a: list[str], b: list[str]) -> tuple[float, float]:
    """A band holding about the middle third of these pairs' bi probabilities."""
    probe = load_predictor(write_tiny_cascade(tmp_path / "probe", WIDTH_ZERO))
    p = probe.bi_probability(a, b)
    return float(np.quantile(p, 0.33)), float(np.quantile(p, 0.66))


# ---------------------------------------------------------------------------------------- band fitting
def test_band_fitting_covers_the_bi_stages_disagreements_with_the_fewest_pairs() -> None:
    p = np.array([0.05, 0.1, 0.2, 0.35, 0.45, 0.55, 0.6, 0.8, 0.9, 0.95])
    cross = (p >= 0.5).astype(int)
    cross[[3, 6]] = [1, 0]  # the cross-encoder disagrees with the bi stage at 0.35 and 0.6
    band = fit_band(p, cross, 0.5, max_disagreement=0.0, rule="point")  # the band's geometry, per miss
    assert (band.low, band.high) == pytest.approx((0.275, 0.7))  # halfway to the neighbours outside
    assert in_band(p, band.low, band.high).tolist() == [False] * 3 + [True] * 4 + [False] * 3
    assert (band.share_to_cross, band.disagreement) == (0.4, 0.0)
    # one disagreement allowed in ten: the cheaper band covers only one of the two
    one = fit_band(p, cross, 0.5, max_disagreement=0.1, rule="point")
    assert one.share_to_cross == 0.1 and one.disagreement == 0.1
    assert in_band(p, one.low, one.high).sum() == 1
    # the bi stage already agrees: a band of width zero, nothing to the cross-encoder
    none = fit_band(p, (p >= 0.5).astype(int), 0.5, max_disagreement=0.0, rule="point")
    assert none.low == none.high and not in_band(p, none.low, none.high).any()
    # tied probabilities go in or out together
    tied = fit_band(np.array([0.4, 0.4, 0.4, 0.9]), np.array([1, 0, 0, 1]), 0.5, 0.0, rule="point")
    assert in_band(np.array([0.4, 0.9]), tied.low, tied.high).tolist() == [True, False]


def test_the_default_band_leaves_at_most_floor_limit_times_n_plus_1_minus_1_dev_misses() -> None:
    """Conformal risk control: k misses left outside on n pairs with (k + 1) / (n + 1) <= the limit.

    The point rule (k <= limit * n) left 2 of MSRP's 408 dev pairs and test then differed on 1-1.4%."""
    n, limit = 408, 0.005
    p = np.linspace(0.01, 0.99, n)
    cross = (p >= 0.5).astype(int)
    cross[[10, 60, 380]] = 1 - cross[[10, 60, 380]]  # three misses of the bi stage: 10 and 60 lie closest
    band = fit_band(p, cross, 0.5, limit)
    assert band.rule == "crc" and band.allowed_misses == allowed_misses(n, limit) == 1
    assert (band.allowed_misses + 1) / (n + 1) <= limit < (band.allowed_misses + 2) / (n + 1)
    assert round(band.disagreement * n) == 1 and in_band(p[[10, 60]], band.low, band.high).all()
    point = fit_band(p, cross, 0.5, limit, rule="point")
    assert point.allowed_misses == 2 and round(point.disagreement * n) == 2
    assert point.share_to_cross < band.share_to_cross
    # too few pairs to certify 0.5% (n + 1 < 200): every pair goes to the cross-encoder
    few = fit_band(p[:198], cross[:198], 0.5, limit)
    assert (few.low, few.high, few.share_to_cross, few.allowed_misses) == (-1.0, 2.0, 1.0, -1)
    assert allowed_misses(199, limit) == 0 and allowed_misses(98, 0.01) == -1
    # the rule and its bound travel with the model: cascade.json and its MLflow version's tags
    spec = CascadeSpec(members=["a", "b"], band_low=band.low, band_high=band.high, band_rule=band.rule,
                       dev_allowed_misses=band.allowed_misses)  # fmt: skip
    assert spec.tags()["cascade.band_rule"] == "crc" and spec.tags()["cascade.dev_allowed_misses"] == "1"


# ------------------------------------------------------------------ the cascade predictor, by hand
def test_width_zero_is_the_bi_stage_full_band_is_the_cross_encoder_rows_say_which(tmp_path: Path) -> None:
    table = make_pairs(200, seed=21)
    a, b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    bi = load_predictor(write_tiny_cascade(tmp_path / "zero", WIDTH_ZERO))
    cross = load_predictor(write_tiny_cascade(tmp_path / "full", FULL))
    bi_alone = bi.members[0].predict(a, b)
    cross_alone = cross.members[1].predict(a, b)

    zero = bi.predict(a, b)
    assert set(zero["scored_by"]) == {"bi"}
    np.testing.assert_array_equal(zero["probability"], bi_alone["probability"])
    full = cross.predict(a, b)
    assert set(full["scored_by"]) == {"cross"}
    for key in ("score", "probability", "label"):
        np.testing.assert_array_equal(full[key], cross_alone[key])

    low, high = _band_in_the_middle(tmp_path, a, b)
    mid = load_predictor(write_tiny_cascade(tmp_path / "mid", (low, high)))
    out = mid.predict(a, b)
    inside = (bi_alone["probability"] > low) & (bi_alone["probability"] < high)
    assert 0 < inside.sum() < len(a)
    assert out["scored_by"].tolist() == np.where(inside, "cross", "bi").tolist()
    np.testing.assert_array_equal(out["probability"][inside], cross_alone["probability"][inside])
    np.testing.assert_array_equal(out["probability"][~inside], bi_alone["probability"][~inside])
    assert out["label"].tolist() == (out["probability"] >= mid.threshold).astype(int).tolist()
    agreement = compare_with_cross(mid, a, b)
    assert agreement.share_to_cross == pytest.approx(inside.mean())
    assert agreement.disagreement == pytest.approx(np.mean(out["label"] != cross_alone["label"]))


def test_bulk_scoring_marks_each_row_and_matches_the_predictor(tmp_path: Path) -> None:
    table = make_pairs(600, seed=22)
    a, b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    model = write_tiny_cascade(tmp_path / "cascade", _band_in_the_middle(tmp_path, a, b))
    write_batch(table, tmp_path / "inbox" / "night.parquet")
    summary = score_inbox(str(tmp_path / "inbox"), tmp_path / "out", str(model), chunk_rows=256, threads=1)
    assert (summary.files_scored, summary.rows_scored) == (1, 600)
    assert summary.sentences_encoded > 0  # the bi stage went through the embedding store
    scored = read_outputs(tmp_path / "out")
    assert_exactly_once(table, scored)
    expected = load_predictor(model).predict(a, b)
    assert scored.column("scored_by").to_pylist() == expected["scored_by"].tolist()
    assert {"bi", "cross"} == set(scored.column("scored_by").to_pylist())
    np.testing.assert_allclose(scored.column("probability").to_numpy(), expected["probability"], atol=1e-5)


def test_truncation_flags_tokenize_each_sentence_once_and_equal_each_stages_own(tmp_path: Path) -> None:
    """The cascade counts tokens once per distinct sentence for both stages; the flags must still be
    what each stage says: the bi stage cuts one long text, the cross-encoder two medium ones together."""
    cascade = load_predictor(write_tiny_cascade(tmp_path / "cascade", WIDTH_ZERO))
    medium, long = "word " * 70, "word " * 140  # 70 tokens fit alone in 128, two of them do not
    a = ["a short one", medium, long, "a short one", medium, "x"]
    b = ["another short", medium, "short", "another short", "y", long]
    own = np.zeros(len(a), dtype=bool)
    for member in cascade.members:
        own |= member.truncated(a, b)
    assert own.tolist() == [False, True, True, False, False, True]
    assert not cascade.members[0].truncated(a, b)[1]  # the medium pair: the cross-encoder's cut only
    assert cascade.truncated(a, b).tolist() == own.tolist()
    assert cascade.truncated([], []).tolist() == []


def test_int8_quantizes_the_bi_stage_only(tmp_path: Path) -> None:

    model = write_tiny_cascade(tmp_path / "cascade", FULL)
    loaded = load_predictor(str(model), precision="int8", backend="onnx", threads=1)
    assert [type(m).__name__ for m in loaded.members] == ["Int8Predictor", "OrtPredictor"]


def test_pyfunc_serves_the_cascade_with_its_stage_column(tmp_path: Path) -> None:
    table = make_pairs(60, seed=23)
    a, b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    model = write_tiny_cascade(tmp_path / "cascade", _band_in_the_middle(tmp_path, a, b))
    direct = load_predictor(model).predict(a, b)
    mlflow.set_tracking_uri(f"sqlite:///{seed_store(tmp_path)}")  # artifacts in tmp, not ./mlruns
    with mlflow.start_run():
        info = log_pyfunc(model, "paraphrase")
    served = mlflow.pyfunc.load_model(info.model_uri).predict(pd.DataFrame({"text_a": a, "text_b": b}))
    assert served["scored_by"].tolist() == direct["scored_by"].tolist()
    np.testing.assert_allclose(served["probability"].to_numpy(), direct["probability"], atol=1e-6)
    assert "scored_by" in [c.name for c in info.signature.outputs.inputs]


# --------------------------------------------------------------------------- fitted on a toy home
def write_cascade_config(home: Path) -> Path:
    """`cascade.yaml` in the toy home: a tiny cross-encoder member (one epoch on msrp/train, a quarter
    carved for dev), the zero-shot backbone as its bi stage, a band that may not differ on dev."""
    member = {
        "name": "cross", "task": "paraphrase", "kind": "cross", "objective": "bce", "backbone": "tiny",
        "train": [{"dataset": "msrp", "split": "train"}],
        "dev": {"split": None, "carve_fraction": 0.25}, "max_length": 48, "epochs": 1, "batch_size": 8,
        "learning_rate": 2e-3, "progress": False, "num_threads": 1,
    }  # fmt: skip
    (home / "cross.yaml").write_text(yaml.safe_dump(member))
    config = {"name": "casc", "task": "paraphrase", "members": ["cross.yaml"], "combine": "cascade",
              "zero_shot": True, "max_disagreement": 0.0}  # fmt: skip
    (home / "cascade.yaml").write_text(yaml.safe_dump(config))
    return home / "cascade.yaml"


def test_cascade_config_fits_a_band_that_agrees_with_its_cross_encoder_on_dev(home: Path) -> None:
    write_toy_home(home)
    write_cascade_config(home)
    result = train_stack_file(home / "cascade.yaml", home)
    out = result.model_dir

    spec = CascadeSpec.read(out)
    assert spec.members[0].endswith("zero-shot-0") and spec.members[1].startswith("members/1-")
    assert "Platt" in spec.bi_calibration  # the untouched backbone has none: fitted on dev
    assert json.loads((out / spec.members[0] / "simpair.json").read_text())["calibration"] is not None
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["cascade"]["disagreement"] == spec.dev_disagreement == 0.0
    assert metrics["cascade"]["share_to_cross"] == spec.dev_share_to_cross
    # no share of unseen decisions may differ: only the cross-encoder on every pair certifies that
    assert spec.band_rule == metrics["cascade"]["band_rule"] == "crc"
    assert (
        spec.dev_allowed_misses == allowed_misses(spec.dev_pairs, 0.0) == -1 and spec.dev_share_to_cross == 1
    )

    predictor = load_predictor(out)
    ids = (out / "dev_pair_ids.txt").read_text().split()
    from simpair.catalog import Catalog

    dev = Catalog(home).read_split("msrp", "train")
    dev = dev.filter(dev["pair_id"].is_in(ids))
    agreement = compare_with_cross(predictor, dev["text_a"].to_list(), dev["text_b"].to_list())
    assert agreement.disagreement == 0.0  # max_disagreement 0: every dev decision is the cross's
    assert agreement.share_to_cross == pytest.approx(spec.dev_share_to_cross)
    assert set(ModelMetadata.read(out).train_datasets) >= {"msrp/train"}

    # the int8 parity guard measures the cascade as a whole on its dev split (int8 in the bi stage)
    from simpair.selection.int8_guard import Int8Limits, measure

    check = measure(out, home, Int8Limits(), threads=1)
    assert (check.pairs, check.metric) == (len(ids), "f1") and check.verdict in ("accepted", "refused")

    # the CLI fits one from the trained cross-encoder, with a looser limit: never a wider band
    from typer.testing import CliRunner

    from simpair.cli import app

    loose = home / "models" / "loose"
    args = [
        "cascade",
        "--cross",
        str(result.member_dirs[0]),
        "--max-disagreement",
        "0.2",
        "--out",
        str(loose),
    ]
    done = CliRunner().invoke(app, [*args, "--home", str(home)])
    assert done.exit_code == 0, done.output
    assert CascadeSpec.read(loose).dev_disagreement <= 0.2
    assert CascadeSpec.read(loose).dev_share_to_cross <= spec.dev_share_to_cross

    # unlabeled pairs like the traffic join dev in the fit; what is recorded is what the model does there
    from simpair.ensemble.band_pool import BandPoolRef, read_pool

    traffic, pooled = home / "traffic.parquet", home / "models" / "pooled"
    write_batch(make_pairs(300, seed=8), traffic)
    with_pool = [*args[:-1], str(pooled), "--band-pool", str(traffic), "--band-pool-pairs", "250"]
    done = CliRunner().invoke(app, [*with_pool, "--home", str(home)])
    assert done.exit_code == 0, done.output
    fitted = CascadeSpec.read(pooled)
    assert (fitted.pool_pairs, fitted.pool_source) == (250, str(traffic))
    misses = fitted.dev_disagreement * fitted.dev_pairs + fitted.pool_disagreement * fitted.pool_pairs
    assert round(misses) <= allowed_misses(fitted.dev_pairs + fitted.pool_pairs, 0.2)
    pool = read_pool(BandPoolRef(path=str(traffic), pairs=250))
    there = compare_with_cross(load_predictor(pooled), pool.text_a, pool.text_b)
    assert there.disagreement == pytest.approx(fitted.pool_disagreement)
    assert there.share_to_cross == pytest.approx(fitted.pool_share_to_cross)
    assert fitted.tags()["cascade.pool_pairs"] == "250"
    nowhere = [*args[:-1], str(home / "models" / "x"), "--band-pool", str(home / "nope.parquet")]
    missing = CliRunner().invoke(app, [*nowhere, "--home", str(home)], env={"COLUMNS": "400"})
    assert missing.exit_code != 0 and "nope.parquet" in missing.output

    # or a split of the catalog: the cross-encoder's own training pairs (dev's carve dropped from them)
    by_split = home / "models" / "by-split"
    split_pool = [*args[:-1], str(by_split), "--band-pool-split", "msrp/train"]
    done = CliRunner().invoke(app, [*split_pool, "--home", str(home)])
    assert done.exit_code == 0, done.output
    fitted = CascadeSpec.read(by_split)
    train = Catalog(home).read_split("msrp", "train")
    assert fitted.pool_source == f"msrp/train@{Catalog(home).current_version('msrp')}"
    assert fitted.pool_pairs == train.height - len(ids)  # every train pair but dev's
    dev_pairs = set(zip(dev["text_a"], dev["text_b"], strict=True))
    pool = read_pool(BandPoolRef(split="msrp/train"), home).without(dev_pairs)
    there = compare_with_cross(load_predictor(by_split), pool.text_a, pool.text_b)
    assert there.disagreement == pytest.approx(fitted.pool_disagreement)
    # a split no member trained on counts as training data for leakage, as dev does
    stsb_pool = home / "models" / "stsb-pool"
    with_stsb = [*args[:-1], str(stsb_pool), "--band-pool-split", "stsb/train", "--home", str(home)]
    done = CliRunner().invoke(app, with_stsb)
    assert done.exit_code == 0, done.output
    assert "stsb/train" in ModelMetadata.read(stsb_pool).train_datasets
    stsb_ids = Catalog(home).read_split("stsb", "train")["pair_id"].to_list()
    recorded = set((stsb_pool / "train_pairs.txt").read_text().splitlines())
    assert {f"stsb\ttrain\t{i}" for i in stsb_ids} <= recorded

    dev.select("text_a", "text_b").write_parquet(home / "dev-only.parquet")
    refusals = [
        (["--band-pool-split", "msrp/test"], "is a test split"),
        (["--band-pool-split", "msrp/nope"], "has splits"),
        (["--band-pool-split", "nope/train"], "has not been ingested"),
        (["--band-pool-split", "msrp"], "DATASET/SPLIT"),
        (["--band-pool-split", "msrp/train", "--band-pool", str(traffic)], "not both"),
        (["--band-pool-split", "msrp/train", "--split", "msrp/train"], "evaluated afterwards"),
        (["--band-pool", str(home / "dev-only.parquet")], "every pair of it is a dev pair"),
    ]
    for extra, said in refusals:
        wrong = [*args[:-1], str(home / "models" / "x"), *extra, "--home", str(home)]
        refused = CliRunner().invoke(app, wrong, env={"COLUMNS": "400"})
        assert refused.exit_code != 0 and said in refused.output, refused.output
        assert "pydantic" not in refused.output
    # in a config, a test split as the pool fails before any member trains, nested configs' too
    from simpair.ensemble.train import build_members

    def never(*_: object) -> list[Path]:
        raise AssertionError("a member trained before the pool was checked")

    bad = yaml.safe_load((home / "cascade.yaml").read_text()) | {"band_pool": {"split": "msrp/test"}}
    (home / "bad.yaml").write_text(yaml.safe_dump(bad))
    outer = {"name": "outer", "task": "paraphrase", "members": ["bad.yaml", "cross.yaml"], "combine": "stack"}
    (home / "outer.yaml").write_text(yaml.safe_dump(outer))
    for path in (home / "bad.yaml", home / "outer.yaml"):
        with pytest.raises(ValueError, match="is a test split"):
            build_members(StackConfig.from_yaml(path), never, never, home=home)
    with pytest.raises(ValueError, match="needs the pipeline home"):
        build_members(StackConfig.from_yaml(home / "outer.yaml"), never, never)
    # and with --config, the pool's split is not what --split evaluates on afterwards
    pooled = yaml.safe_load((home / "cascade.yaml").read_text()) | {"band_pool": {"split": "msrp/train"}}
    (home / "pooled.yaml").write_text(yaml.safe_dump(pooled))
    config_args = ["cascade", "--config", str(home / "pooled.yaml"), "--split", "msrp/train"]
    refused = CliRunner().invoke(app, [*config_args, "--home", str(home)], env={"COLUMNS": "400"})
    assert refused.exit_code != 0 and "band_pool" in refused.output, refused.output

    with pytest.raises(ValueError, match="task must be paraphrase"):
        StackConfig(name="c", task="sts", members=["x.yaml"], combine="cascade")
    with pytest.raises(ValueError, match="only combine: cascade"):
        StackConfig(name="c", task="paraphrase", members=["x.yaml"], band_pool={"path": "pairs.parquet"})
    with pytest.raises(ValueError, match="is in evaluate_on"):
        StackConfig(
            name="c", task="paraphrase", members=["x.yaml"], combine="cascade",
            band_pool={"split": "msrp/test"}, evaluate_on=[{"dataset": "msrp", "split": "test"}],
        )  # fmt: skip
    with pytest.raises(ValueError, match="one of path"):
        StackConfig(
            name="c", task="paraphrase", members=["x.yaml"], combine="cascade",
            band_pool={"path": "p.parquet", "split": "msrp/train"},
        )  # fmt: skip


# ------------------------------------------------------------------------------ crash and resume
@pytest.mark.slow
def test_sigkill_then_resume_scores_a_cascade_exactly_once_with_identical_scores(tmp_path: Path) -> None:
    table = make_pairs(2000, seed=24)
    a, b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    model = write_tiny_cascade(tmp_path / "cascade", _band_in_the_middle(tmp_path, a[:400], b[:400]))
    inbox, out, clean = tmp_path / "inbox", tmp_path / "out", tmp_path / "clean"
    write_batch(table, inbox / "big.parquet", row_group_size=1300)

    proc = subprocess.Popen(_cmd(inbox, out, model), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_chunks(out, proc, 2)  # of 4 chunks of 500 rows
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    resumed = subprocess.run(_cmd(inbox, out, model), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # the same run uninterrupted, in this process: same runtime, options and chunks
    score_inbox(str(inbox), clean, str(model), chunk_rows=500, threads=1)

    got, want = read_outputs(out), read_outputs(clean)
    assert_exactly_once(table, got)
    assert len(set(got.column("run_id").to_pylist())) == 2  # chunks of the killed run were kept
    for column in ("scored_by", "label", "score", "probability"):
        assert got.column(column).equals(want.column(column)), column
    assert set(got.column("scored_by").to_pylist()) == {"bi", "cross"}


@pytest.mark.usefixtures("one_torch_thread")
def test_the_night_fits_a_cascades_band_on_its_chosen_wise_ft_cross_encoder(home: Path) -> None:
    """With `wise_ft` on a cascade task, the night walks the WiSE-FT path of the trained cross-encoder
    and fits the band on the chosen interpolation: the band must agree with the cross-encoder the
    cascade runs, not with the one before the choice."""
    from simpair.nightly.profile import Retries
    from simpair.nightly.train import TrainingJob, run_training
    from simpair.selection.wise_rule import ChoiceCanary, WiseFtPolicy
    from simpair.stages import InProcess

    write_toy_home(home)
    write_cascade_config(home)
    policy = WiseFtPolicy(alphas=[0.5, 1.0], canaries=[ChoiceCanary(dataset="stsb", split="dev")])
    job = TrainingJob(
        "paraphrase", str(home / "cascade.yaml"), str(home), [("msrp", "test")], Retries(), 1, policy
    )

    trained = run_training(job, InProcess())

    out = Path(trained.model_dir)
    spec = CascadeSpec.read(out)
    cross_dir = out / spec.members[1]
    assert spec.members[1].endswith("-wiseft"), spec.members  # the chosen interpolation, not the fine-tune
    record = json.loads((cross_dir / "metrics.json").read_text())["wise_ft"]
    assert record["alpha"] in (0.5, 1.0) and set(record["by_alpha"]) == {"0.5", "1"}
    assert "wise_ft" not in json.loads((out / "metrics.json").read_text())  # no walk over the whole cascade
    predictor = load_predictor(out)
    ids = (out / "dev_pair_ids.txt").read_text().split()
    from simpair.catalog import Catalog

    dev = Catalog(home).read_split("msrp", "train")
    dev = dev.filter(dev["pair_id"].is_in(ids))
    agreement = compare_with_cross(predictor, dev["text_a"].to_list(), dev["text_b"].to_list())
    assert agreement.disagreement == 0.0  # the band agrees with the chosen cross-encoder on dev


def test_a_band_pool_reads_an_inbox_folder_and_is_found_beside_its_config(tmp_path: Path) -> None:
    from simpair.ensemble.band_pool import BandPoolRef, read_pool

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.tsv").write_text('text_a\ttext_b\n"Hello, he said\tthe cat\nx\t \nsame\tpair\nsame\tpair\n')
    (inbox / "_partial.tsv").write_text("text_a\ttext_b\nnot\tyet\n")  # an upload in progress: skipped
    write_batch(make_pairs(5, seed=1), inbox / "b.parquet")
    pool = read_pool(BandPoolRef(path=str(inbox)))
    assert ('"Hello, he said', "the cat") in zip(pool.text_a, pool.text_b, strict=True)  # quotes are text
    assert len(pool) == 2 + 5 and "not" not in pool.text_a  # blank text dropped, duplicates once
    assert len(read_pool(BandPoolRef(path=str(inbox), pairs=3))) == 3
    with pytest.raises(ValueError, match="text_a and text_b"):
        (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
        read_pool(BandPoolRef(path=str(tmp_path / "bad.csv")))

    def config(path: str) -> StackConfig:
        return StackConfig(
            name="c", task="paraphrase", members=["x.yaml"], combine="cascade", zero_shot=True,
            band_pool={"path": path}, source=str(tmp_path / "c.yaml"),
        )  # fmt: skip

    assert config("inbox").band_pool_ref().path == str(inbox)  # relative to the config file
    with pytest.raises(ValueError, match="no such file"):
        config("typo").band_pool_ref()
