"""Training end to end on a toy home with a tiny real BERT: format, lineage, leakage, reproducibility."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from test_training_toydata import write_toy_home

from simpair.catalog import Catalog
from simpair.evaluation import binary_metrics, graded_metrics
from simpair.runtime.loader import load_predictor
from simpair.training import TrainConfig, train
from simpair.training.data import carve_dev, length_grouped_batches

# Tiny models run fastest on one thread, and the machine is shared: no oversubscription.
pytestmark = pytest.mark.usefixtures("one_thread")


def config(**changes: object) -> TrainConfig:
    base: dict[str, object] = {
        "name": "toy",
        "task": "paraphrase",
        "kind": "cross",
        "objective": "bce",
        "backbone": "tiny",
        "train": [{"dataset": "msrp", "split": "train"}],
        "dev": {"split": None, "carve_fraction": 0.25},
        "evaluate_on": [{"dataset": "msrp", "split": "test"}],
        "max_length": 48,
        "epochs": 2,
        "batch_size": 8,
        "learning_rate": 2e-3,
        "progress": False,
        "num_threads": 1,
    }
    base.update(changes)
    return TrainConfig.model_validate(base)


def test_train_writes_a_complete_model_directory_and_round_trips(home: Path) -> None:
    write_toy_home(home)
    result = train(config(), home)
    d = result.model_dir
    assert d.parent == home / "models" and d.name.startswith("toy-")
    names = {p.name for p in d.iterdir()}
    assert {
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "simpair.json",
        "train_config.yaml",
        "metrics.json",
        "dev_pair_ids.txt",
        "train_pairs.txt",
    } <= names
    meta = json.loads((d / "simpair.json").read_text())
    assert meta["kind"] == "cross" and meta["task"] == "paraphrase" and meta["objective"] == "bce"
    assert meta["dataset_versions"] == {"msrp": "v1"} and meta["train_datasets"] == ["msrp/train"]
    assert TrainConfig.model_validate(yaml.safe_load((d / "train_config.yaml").read_text())) == config()
    metrics = json.loads((d / "metrics.json").read_text())
    assert len(result.history) == len(metrics["history"]) <= 2
    assert metrics["train_samples_per_s"] > 0 and metrics["dev_source"].startswith("msrp/train carved")

    # Dev carved from train: 25 %, stratified, disjoint from what was trained on.
    dev_ids = (d / "dev_pair_ids.txt").read_text().split()
    trained = {line.split("\t")[2] for line in (d / "train_pairs.txt").read_text().splitlines()}
    assert len(dev_ids) == 12 and not set(dev_ids) & trained and len(trained) == 36

    # Round trip: the saved model, reloaded, reproduces the dev metrics recorded at training time.
    frame = Catalog(home).read_split("msrp", "train")
    frame = frame.filter(frame["pair_id"].is_in(dev_ids))
    pred = load_predictor(d)
    out = pred.predict(frame["text_a"].to_list(), frame["text_b"].to_list())
    again = binary_metrics(out["probability"], frame["label"].to_numpy(), pred.threshold)
    for key in ("accuracy", "f1", "roc_auc", "threshold"):
        assert again[key] == pytest.approx(metrics["dev"][key], abs=1e-6)


def test_same_config_and_data_give_identical_results(home: Path, tmp_path: Path) -> None:
    write_toy_home(home)
    first = train(config(output_dir=str(tmp_path / "a"), epochs=1), home)
    second = train(config(output_dir=str(tmp_path / "b"), epochs=1), home)
    assert first.metrics["dev"] == second.metrics["dev"]
    assert first.history[0]["train_loss"] == second.history[0]["train_loss"]
    from safetensors.numpy import load_file

    wa, wb = (
        load_file(first.model_dir / "model.safetensors"),
        load_file(second.model_dir / "model.safetensors"),
    )
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_leaked_pairs_are_excluded_from_training_and_recorded(home: Path) -> None:
    write_toy_home(home)
    cfg = config(
        task="sts",
        kind="bi",
        objective="cosent",
        train=[{"dataset": "stsb", "split": "train"}],
        dev={"split": "dev"},
        evaluate_on=[{"dataset": "msrp", "split": "test"}, {"dataset": "stsb", "split": "test"}],
        epochs=1,
    )
    result = train(cfg, home)
    assert result.metrics["excluded_leaked_train_pairs"] == {"stsb/train": 2}
    trained = (result.model_dir / "train_pairs.txt").read_text()
    assert "stsb-train-0048" not in trained and "stsb-train-0049" not in trained
    assert result.metrics["train_pairs"] == 48
    assert set(result.metrics["dev"]) >= {"spearman", "pearson", "mse", "mae"}
    # The 0-1 score is a monotone map of the cosine fitted on dev: same ranking, no clipping ties.
    pred = load_predictor(result.model_dir)
    assert pred.meta.calibration is not None and pred.meta.calibration.a > 0
    frame = Catalog(home).read_split("stsb", "dev")
    raw = pred.predict_raw(frame["text_a"].to_list(), frame["text_b"].to_list())
    score = pred.predict(frame["text_a"].to_list(), frame["text_b"].to_list())["score"]
    assert graded_metrics(score, frame["score"].to_numpy())["spearman"] == pytest.approx(
        graded_metrics(raw, frame["score"].to_numpy())["spearman"]
    )


def test_exclude_pair_ids_holds_pairs_out_of_train_and_dev(home: Path) -> None:
    from simpair.models.tiny import default_backbone
    from simpair.models.tokenizer import load_tokenizer
    from simpair.training.data import load_train_data

    write_toy_home(home)
    held_out = r"-00[0-1]\d$"  # ids ...-0000 to ...-0019: the first 20 pairs of each split
    cfg = config(
        task="sts",
        kind="bi",
        objective="cosent",
        train=[{"dataset": "stsb", "split": "train", "exclude_pair_ids": held_out}],
        dev={"split": "dev", "exclude_pair_ids": held_out},
        evaluate_on=[],
    )
    data = load_train_data(cfg, home, load_tokenizer(default_backbone()))
    assert len(data.train) == 50 - 20 and len(data.dev) == 24 - 20
    assert not any(pid.endswith(("-0000", "-0019")) for pid in data.train.pair_ids + data.dev.pair_ids)
    with pytest.raises(ValueError, match="not a regular expression"):
        config(train=[{"dataset": "msrp", "split": "train", "exclude_pair_ids": "("}])


@pytest.mark.parametrize(
    ("kind", "objective", "extra"),
    [
        ("bi", "online_contrastive", {}),
        ("bi", "softmax", {"symmetric": True}),
        ("cross", "bce", {"symmetric": True, "freeze_encoder_epochs": 1, "head_learning_rate": 1e-2}),
    ],
)
def test_variants_train_and_predict(home: Path, kind: str, objective: str, extra: dict) -> None:
    write_toy_home(home)
    result = train(config(kind=kind, objective=objective, **extra), home)
    pred = load_predictor(result.model_dir)
    if kind == "bi":  # the cosine is calibrated into a probability on dev (Platt)
        assert pred.meta.calibration is not None
    if extra.get("freeze_encoder_epochs"):
        assert result.history[0]["frozen_encoder"] and not result.history[-1]["frozen_encoder"]
    assert pred.meta.symmetric == (kind == "cross" and bool(extra.get("symmetric")))
    out = pred.predict(["a man saw the house."], ["the house was seen by a man."])
    assert 0 <= out["probability"][0] <= 1


def test_early_stopping_keeps_the_best_epoch(home: Path) -> None:
    write_toy_home(home)
    result = train(config(epochs=6, early_stopping_patience=1, learning_rate=5e-2), home)
    values = [h["dev"]["accuracy"] for h in result.history]
    best = int(np.argmax(values))
    assert result.metrics["best_epoch"] == best + 1
    # Stopped after one epoch without improvement, unless it ran out of epochs first.
    assert len(values) == 6 or values[-1] <= values[best]
    assert result.metrics["dev"]["n"] == 12


def test_checkpoint_averaging_is_kept_only_if_better_on_dev(home: Path) -> None:
    write_toy_home(home)
    result = train(config(epochs=3, average_last_checkpoints=2, early_stopping_patience=None), home)
    assert result.metrics["weights"] in {"best_epoch", "average_of_last_2"}
    best_single = max(h["dev"]["accuracy"] for h in result.history)
    assert (
        result.metrics["dev"]["accuracy"] >= best_single - 1e-9 or result.metrics["weights"] == "best_epoch"
    )


def test_intermediate_training_inherits_lineage(home: Path) -> None:
    write_toy_home(home)
    sts = train(
        config(task="sts", train=[{"dataset": "stsb", "split": "train"}], dev={"split": "dev"}, epochs=1),
        home,
    )
    para = train(config(backbone=str(sts.model_dir), epochs=1), home)
    meta = load_predictor(para.model_dir).meta
    assert meta.train_datasets == ["msrp/train", "stsb/train"] and meta.init_from == str(sts.model_dir)
    # "home:NAME" picks the newest trained model of that run name (chained nightly runs).
    chained = train(config(backbone="home:toy", epochs=1, output_dir=str(home / "chained")), home)
    assert load_predictor(chained.model_dir).meta.init_from == str(para.model_dir)
    lines = (para.model_dir / "train_pairs.txt").read_text().splitlines()
    assert any(line.startswith("stsb\ttrain\t") for line in lines)
    assert any(line.startswith("msrp\ttrain\t") for line in lines)


def test_a_cross_encoder_can_start_from_a_trained_bi_encoder(home: Path) -> None:
    """The bi-encoder's fine-tuned encoder carries over under a fresh head; a stack cannot be a parent."""
    from safetensors.torch import load_file

    write_toy_home(home)
    sts = dict(task="sts", train=[{"dataset": "stsb", "split": "train"}], dev={"split": "dev"}, epochs=1)
    bi = train(config(kind="bi", objective="cosent", **sts), home)
    # One optimiser step at a negligible rate: the cross-encoder's encoder is still the bi-encoder's.
    cross = train(config(backbone=str(bi.model_dir), max_steps=1, learning_rate=1e-12, **sts), home)
    meta = load_predictor(cross.model_dir).meta
    assert meta.kind == "cross" and meta.init_from == str(bi.model_dir)
    assert meta.train_datasets == ["stsb/train"]
    bi_weights = load_file(str(bi.model_dir / "model.safetensors"))
    cross_weights = load_file(str(cross.model_dir / "model.safetensors"))
    key = "embeddings.word_embeddings.weight"
    cross_key = next(k for k in cross_weights if k.endswith(key))
    assert torch.allclose(bi_weights[key], cross_weights[cross_key], atol=1e-6)
    fresh = train(config(max_steps=1, learning_rate=1e-12, **sts), home)
    fresh_weights = load_file(str(fresh.model_dir / "model.safetensors"))
    assert not torch.allclose(bi_weights[key], fresh_weights[cross_key], atol=1e-6)

    (bi.model_dir.parent / "stacked").mkdir()
    stacked_meta = json.loads((bi.model_dir / "simpair.json").read_text()) | {"kind": "stacked"}
    (bi.model_dir.parent / "stacked" / "simpair.json").write_text(json.dumps(stacked_meta))
    with pytest.raises(ValueError, match="stacked ensemble"):
        train(config(backbone=str(bi.model_dir.parent / "stacked"), **sts), home)


def test_runs_of_one_name_never_share_a_model_directory(tmp_path: Path) -> None:
    """Seeds trained side by side can finish in the same second: each still gets its own directory."""
    from simpair.models.io import new_model_dir

    dirs = [new_model_dir(tmp_path / "models", "stsb-bi") for _ in range(3)]
    assert len(set(dirs)) == 3 and all(d.is_dir() and d.name.startswith("stsb-bi-") for d in dirs)


def test_batches_are_length_grouped_seeded_and_cover_everything() -> None:
    lengths = np.random.default_rng(0).integers(5, 100, size=1000)
    batches = length_grouped_batches(lengths, 16, seed=3)
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    assert [b.tolist() for b in batches] == [b.tolist() for b in length_grouped_batches(lengths, 16, seed=3)]
    grouped_pad = sum(lengths[b].max() * len(b) - lengths[b].sum() for b in batches)
    random_pad = sum(
        lengths[b].max() * len(b) - lengths[b].sum() for b in length_grouped_batches(lengths, 16, 3, False)
    )
    assert grouped_pad < 0.2 * random_pad


def test_batches_can_be_kept_to_one_source_each() -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(5, 100, size=300)
    sources = ["stsb"] * 170 + ["msrp"] * 130
    batches = length_grouped_batches(lengths, 16, seed=3, sources=sources)
    assert sorted(np.concatenate(batches).tolist()) == list(range(300))
    assert all(len({sources[i] for i in b}) == 1 for b in batches)
    # interleaved, not one dataset after the other
    firsts = [sources[b[0]] for b in batches]
    assert sum(x != y for x, y in zip(firsts, firsts[1:], strict=False)) > 4
    again = length_grouped_batches(lengths, 16, seed=3, sources=sources)
    assert [b.tolist() for b in batches] == [b.tolist() for b in again]
    mixed = length_grouped_batches(lengths, 16, seed=3)
    assert any(len({sources[i] for i in b}) == 2 for b in mixed)


def test_two_datasets_train_one_sts_model_without_their_evaluation_pairs(home: Path) -> None:
    # stsb/test repeats two msrp/train pairs: multi-task training must drop them from msrp/train.
    write_toy_home(home, msrp_train_in_stsb_test=2)
    cfg = config(
        task="sts",
        kind="bi",
        objective="cosent",
        train=[{"dataset": "stsb", "split": "train"}, {"dataset": "msrp", "split": "train"}],
        dev={"split": "dev"},
        evaluate_on=[{"dataset": "stsb", "split": "test"}],
        epochs=1,
    )
    result = train(cfg, home)
    m = result.metrics
    assert m["excluded_leaked_train_pairs"] == {"msrp/train": 2}
    assert m["train_pairs_by_dataset"] == {"msrp": 46, "stsb": 50}
    assert m["batches_by_dataset"] is True
    trained = (result.model_dir / "train_pairs.txt").read_text()
    assert "msrp-train-0000" not in trained and "msrp-train-0002" in trained
    assert "stsb-train-0000" in trained
    mixed = train(cfg.with_overrides(batch_per_dataset=False), home)
    assert mixed.metrics["batches_by_dataset"] is False
    assert mixed.metrics["dev"]["spearman"] != m["dev"]["spearman"]  # other batches, other weights


def test_dev_carve_is_stratified_and_fixed() -> None:
    import polars as pl

    from simpair.pair_tokens import tokens_to_pairs

    labels = np.array([1] * 70 + [0] * 30)
    frame = pl.DataFrame(
        {
            "pair_id": [str(i) for i in range(100)],
            "label": labels,
            "score": [None] * 100,
            "ids_a": [[1]] * 100,
            "ids_b": [[1]] * 100,
            "length_a": [1] * 100,
            "length_b": [1] * 100,
        },
        schema_overrides={"label": pl.Int8, "score": pl.Float32},
    )
    pairs = tokens_to_pairs(frame, "bi", "paraphrase", "d", "train")
    tr, dev = carve_dev(pairs, 0.2, seed=13)
    assert len(dev) == 20 and labels[dev].sum() == 14 and not set(tr) & set(dev)
    assert carve_dev(pairs, 0.2, seed=13)[1].tolist() == dev.tolist()


def test_graded_metrics_are_on_the_0_1_scale() -> None:
    m = graded_metrics(np.array([0.1, 0.5, 0.9]), np.array([0.0, 0.5, 1.0]))
    assert m["spearman"] == pytest.approx(1.0) and m["mae"] == pytest.approx(0.2 / 3)


def test_intermediate_stage_in_one_config_protects_the_final_evaluation_splits(home: Path) -> None:
    write_toy_home(home)
    cfg = config(
        epochs=1,
        intermediate={
            "task": "sts",
            "train": [{"dataset": "stsb", "split": "train"}],
            "dev": {"split": "dev"},
        },
    )
    result = train(cfg, home)
    stage = result.metrics["intermediate"]
    parent_metrics = json.loads((Path(stage["model_dir"]) / "metrics.json").read_text())
    assert parent_metrics["excluded_leaked_train_pairs"] == {"stsb/train": 2}  # the msrp/test twins
    meta = load_predictor(result.model_dir).meta
    assert meta.init_from == stage["model_dir"] and meta.train_datasets == ["msrp/train", "stsb/train"]
    assert (
        TrainConfig.model_validate(yaml.safe_load((result.model_dir / "train_config.yaml").read_text()))
        == cfg
    )


def test_bf16_trains_where_native_and_still_saves_and_predicts_in_fp32(home: Path) -> None:
    from safetensors import safe_open

    from simpair.models.device import native_bf16

    write_toy_home(home)
    native = native_bf16(torch.device("cpu"))
    if native:
        result = train(config(precision="bf16", epochs=1), home)
    else:  # falls back instead of running slow emulated bf16, and says so
        with pytest.warns(UserWarning, match="no native bf16"):
            result = train(config(precision="bf16", epochs=1), home)
    assert result.metrics["autocast"] == ("torch.bfloat16" if native else "fp32")
    with safe_open(str(result.model_dir / "model.safetensors"), "pt") as weights:
        assert {weights.get_tensor(k).dtype for k in weights.keys()} == {torch.float32}  # noqa: SIM118
    assert load_predictor(result.model_dir)._dtype is None  # prediction stays fp32 on CPU


def test_layer_lr_decay_moves_lower_layers_less(home: Path) -> None:
    """Each encoder depth trains at learning_rate * decay ** (layers - depth); the head at the full rate."""
    from safetensors.torch import load_file

    from simpair.models.tiny import build_tiny
    from simpair.training.loop import TrainModule
    from simpair.training.optim import param_groups

    cfg = config(kind="bi", objective="cosent", task="sts", layer_lr_decay=0.5, learning_rate=1.0)
    model, _ = build_tiny("bi", seed=cfg.seed)
    layers = model.encoder.config.num_hidden_layers
    lrs = {}
    for group in param_groups(TrainModule(model, torch.nn.Identity()), cfg):
        names = {n for n, p in model.named_parameters() if any(p is q for q in group["params"])}
        for name in names:
            lrs[name] = group["lr"]
    assert {lr for name, lr in lrs.items() if "embeddings" in name} == {0.5**layers}
    for i in range(layers):
        assert {lr for name, lr in lrs.items() if f".layer.{i}." in name} == {0.5 ** (layers - 1 - i)}

    def change(decay: float) -> dict[str, float]:
        """Largest weight change of the embeddings and of the top layer after real training steps."""
        run = config(kind="bi", objective="cosent", task="sts", layer_lr_decay=decay, max_steps=4, epochs=1)
        run = run.with_overrides(
            train=[{"dataset": "stsb", "split": "train"}], dev={"split": "dev"}, evaluate_on=[]
        )
        start, _ = build_tiny("bi", seed=run.seed)
        before = {k: v.clone() for k, v in start.encoder.state_dict().items()}
        after = load_file(str(train(run, home).model_dir / "model.safetensors"))
        out = {}
        for part, key in (
            ("embeddings", "embeddings.word_embeddings.weight"),
            ("top", f"encoder.layer.{layers - 1}.output.dense.weight"),
        ):
            out[part] = float((after[key] - before[key]).abs().max())
        return out

    write_toy_home(home)
    plain, decayed = change(1.0), change(1e-3)
    assert plain["embeddings"] > 0 and plain["top"] > 0
    assert decayed["top"] > 0.5 * plain["top"]  # the top layer keeps the full rate (decay ** 0)
    assert decayed["embeddings"] < 0.01 * plain["embeddings"]


def test_l2sp_keeps_the_encoder_nearer_its_start_and_wise_ft_zero_returns_to_it(home: Path) -> None:
    from simpair.models.tiny import build_tiny

    write_toy_home(home)
    common = {"epochs": 1, "early_stopping_patience": None, "evaluate_on": []}
    free = train(config(name="free", **common), home)
    pulled = train(config(name="pulled", l2sp=50.0, **common), home)
    assert pulled.metrics["encoder_moved"] < 0.8 * free.metrics["encoder_moved"]

    back = train(config(name="back", wise_ft_alpha=0.0, **common), home)
    assert back.metrics["wise_ft"]["alpha"] == 0.0 and back.metrics["encoder_moved"] == 0.0
    start, _ = build_tiny("cross", seed=42)
    saved = load_predictor(back.model_dir).model.model.state_dict()
    for key, value in start.model.state_dict().items():
        torch.testing.assert_close(saved[key], value)
