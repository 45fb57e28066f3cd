"""Stacked ensembles on a toy home with tiny real BERTs: fitting on dev only, prediction, evaluation,
registration as an MLflow pyfunc, and bulk scoring, all through the same `load_predictor` door."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from mlflow_store import seed_store
from registry_helpers import one_torch_thread  # noqa: F401 - fixture
from test_scoring_support import make_pairs, read_outputs, write_batch
from test_training_toydata import write_toy_home

from simpair import settings
from simpair.catalog import Catalog
from simpair.ensemble import StackConfig, fit_soup, fit_stack, is_stack_config
from simpair.evaluation.splits import evaluate_model
from simpair.registry.pyfunc import log_pyfunc
from simpair.runtime.loader import load_predictor
from simpair.runtime.stack_features import lexical_features
from simpair.runtime.stacked import StackedPredictor
from simpair.scoring import score_inbox
from simpair.training import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _member(task: str, kind: str, objective: str, name: str, **changes: object) -> dict[str, object]:
    """A tiny member's training config (a few seconds on CPU)."""
    dataset = "stsb" if task == "sts" else "msrp"
    base: dict[str, object] = {
        "name": name,
        "task": task,
        "kind": kind,
        "objective": objective,
        "backbone": "tiny",
        "train": [{"dataset": dataset, "split": "train"}],
        "dev": {"split": "dev"} if task == "sts" else {"split": None, "carve_fraction": 0.25},
        "evaluate_on": [{"dataset": dataset, "split": "test"}],
        "max_length": 48,
        "epochs": 1,
        "batch_size": 8,
        "learning_rate": 2e-3,
        "progress": False,
    }
    return {**base, **changes}


def _train(home: Path, task: str, kind: str, objective: str, name: str = "", **changes: object) -> Path:
    config = _member(task, kind, objective, name or f"{task}-{kind}", num_threads=1, **changes)
    return train(TrainConfig.model_validate(config), home).model_dir


def _dev(home: Path, model_dir: Path) -> tuple[list[str], list[str]]:
    ids = (model_dir / "dev_pair_ids.txt").read_text().split()
    frame = Catalog(home).read_split("stsb", "dev")
    frame = frame.filter(frame["pair_id"].is_in(ids))
    return frame["text_a"].to_list(), frame["text_b"].to_list()


def test_graded_stack_predicts_its_fitted_combination_and_evaluates(home: Path) -> None:
    write_toy_home(home)
    bi = _train(home, "sts", "bi", "cosent")
    cross = _train(home, "sts", "cross", "bce")
    out = fit_stack([bi, cross], home, home / "models" / "stack")

    predictor = load_predictor(out)
    assert isinstance(predictor, StackedPredictor) and predictor.kind == "stacked"
    spec = json.loads((out / "stack.json").read_text())
    assert spec["combiner"] == "ridge"
    assert spec["features"] == ["member:0", "member:1", "lexical:jaccard", "lexical:length_ratio"]
    assert spec["regularisation"] > 0

    # The stack's raw output is exactly the standardised linear combination of its parts.
    a, b = _dev(home, bi)
    parts = np.column_stack(
        [
            load_predictor(bi).predict_raw(a, b),
            load_predictor(cross).predict_raw(a, b),
            lexical_features(a, b),
        ]
    )
    expected = ((parts - spec["mean"]) / np.asarray(spec["scale"])) @ spec["coef"] + spec["intercept"]
    np.testing.assert_allclose(predictor.predict_raw(a, b), expected, atol=1e-5)
    scores = predictor.predict(a, b)["score"]
    assert scores.min() >= 0 and scores.max() <= 1 and "label" not in predictor.predict(a, b)

    metrics = json.loads((out / "metrics.json").read_text())
    assert "out-of-fold" in metrics["dev_note"] and -1 <= metrics["dev"]["spearman"] <= 1
    assert [m["member"] for m in metrics["members_dev"]] == [bi.name, cross.name]
    union = set((out / "train_pairs.txt").read_text().splitlines())
    for member in (bi, cross):
        assert set((member / "train_pairs.txt").read_text().splitlines()) <= union

    ev = evaluate_model(out, home, [("stsb", "test")], out_dir=home / "eval-stack")
    split = ev.metrics["splits"]["stsb/test"]
    assert split["evaluated"] + split["excluded_leaked"] == Catalog(home).read_split("stsb", "test").height
    assert ev.metrics["kind"] == "stacked" and ev.report_path.is_file()


def test_a_stack_counts_its_dev_pairs_as_training_data_for_leakage(home: Path) -> None:
    """The combiner learnt from the dev labels: test pairs that also sit in dev are excluded for the
    stack, while its members, which only early-stopped on dev, still evaluate them."""
    write_toy_home(home, stsb_dev_in_stsb_test=3)
    bi = _train(home, "sts", "bi", "cosent")
    cross = _train(home, "sts", "cross", "bce")
    out = fit_stack([bi, cross], home, home / "models" / "stack")

    meta = load_predictor(out).meta
    assert "stsb/dev" in meta.train_datasets
    dev_ids = (out / "dev_pair_ids.txt").read_text().split()
    assert {f"stsb\tdev\t{i}" for i in dev_ids} <= set((out / "train_pairs.txt").read_text().splitlines())
    stack_split = evaluate_model(out, home, [("stsb", "test")], out_dir=home / "ev-stack").metrics["splits"]
    bi_split = evaluate_model(bi, home, [("stsb", "test")], out_dir=home / "ev-bi").metrics["splits"]
    assert stack_split["stsb/test"]["excluded_leaked"] == bi_split["stsb/test"]["excluded_leaked"] + 3


def test_member_products_stack_multiplies_member_outputs(home: Path) -> None:
    write_toy_home(home)
    bi = _train(home, "sts", "bi", "cosent")
    cross = _train(home, "sts", "cross", "bce")
    out = fit_stack([bi, cross], home, home / "models" / "stack-products", lexical=False, products=True)

    spec = json.loads((out / "stack.json").read_text())
    assert spec["features"] == ["member:0", "member:1", "product:0*0", "product:0*1", "product:1*1"]
    a, b = _dev(home, bi)
    u, v = (load_predictor(m).predict_raw(a, b).astype(np.float64) for m in (bi, cross))
    parts = np.column_stack([u, v, u * u, u * v, v * v])
    expected = ((parts - spec["mean"]) / np.asarray(spec["scale"])) @ spec["coef"] + spec["intercept"]
    predictor = load_predictor(out)
    np.testing.assert_allclose(predictor.predict_raw(a, b), expected, atol=1e-5)

    # A hand-edited stack.json with a malformed product name fails naming the feature.
    spec["features"][3] = "product:0x1"
    (out / "stack.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="product:0x1"):
        load_predictor(out).predict_raw(a[:2], b[:2])
    spec["features"][3] = "product:0*2"
    (out / "stack.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="product:0\\*2.*has 2 members"):
        load_predictor(out).predict_raw(a[:2], b[:2])
    with pytest.raises(ValueError, match="a soup has no combiner"):
        StackConfig(name="s", task="sts", members=["x.yaml"], combine="soup", products=True)


def test_paraphrase_stack_has_a_dev_threshold_and_serves_as_pyfunc_and_in_bulk_scoring(
    home: Path, tmp_path: Path
) -> None:
    write_toy_home(home)
    cross = _train(home, "paraphrase", "cross", "bce")
    bi = _train(home, "paraphrase", "bi", "online_contrastive")
    out = fit_stack([cross, bi], home, home / "models" / "stack-para")
    predictor = load_predictor(out)
    assert json.loads((out / "stack.json").read_text())["combiner"] == "logistic"
    assert 0 < predictor.threshold < 1

    texts_a, texts_b = (
        ["A man plays a guitar.", "The bank raised rates."],
        ["Someone plays guitar.", "A cat."],
    )
    direct = predictor.predict(texts_a, texts_b)
    assert direct["label"].tolist() == (direct["probability"] >= predictor.threshold).astype(int).tolist()

    mlflow.set_tracking_uri(f"sqlite:///{seed_store(tmp_path)}")  # artifacts in tmp, not ./mlruns
    with mlflow.start_run():
        info = log_pyfunc(out, "paraphrase")
    served = mlflow.pyfunc.load_model(info.model_uri).predict(
        pd.DataFrame({"text_a": texts_a, "text_b": texts_b})
    )
    np.testing.assert_allclose(served["probability"].to_numpy(), direct["probability"], atol=1e-6)

    table = make_pairs(300, seed=5)
    write_batch(table, tmp_path / "inbox" / "night.parquet")
    summary = score_inbox(  # fp32 pinned: `auto` may pick bf16 where a host runs it faster (compared below)
        str(tmp_path / "inbox"), tmp_path / "out", str(out), home, chunk_rows=128, backend="torch",
        precision="fp32",
    )  # fmt: skip
    assert (summary.files_scored, summary.rows_scored) == (1, 300)
    scored = read_outputs(tmp_path / "out")
    a, b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    expected = predictor.predict(a, b)
    # Chunks of 128 pad differently from one call over all 300 pairs; on AVX-512 hosts the members'
    # float32 sums then differ by ~1e-6 after the logistic combiner (seen: 1.03e-6 on one pair).
    np.testing.assert_allclose(scored.column("probability").to_numpy(), expected["probability"], atol=1e-5)

    # The ONNX backend (the default on CPU) runs inside each member; their raw outputs match torch's.
    onnx_stack = load_predictor(str(out), backend="onnx", threads=1)
    assert [type(m).__name__ for m in onnx_stack.members] == ["OrtPredictor", "OrtPredictor"]
    for onnx_member, torch_member in zip(onnx_stack.members, predictor.members, strict=True):
        np.testing.assert_allclose(onnx_member.predict_raw(a, b), torch_member.predict_raw(a, b), atol=1e-5)


def test_members_tuned_on_different_dev_pairs_or_tasks_are_refused(home: Path) -> None:
    write_toy_home(home)
    first = _train(home, "paraphrase", "cross", "bce")
    other_carve = _train(
        home,
        "paraphrase",
        "cross",
        "bce",
        name="carved-elsewhere",
        dev={"split": None, "carve_fraction": 0.25, "carve_seed": 99},
    )
    with pytest.raises(ValueError, match="share one dev split"):
        fit_stack([first, other_carve], home, home / "models" / "bad")
    graded = _train(home, "sts", "bi", "cosent")
    with pytest.raises(ValueError, match="different tasks"):
        fit_stack([first, graded], home, home / "models" / "bad")
    with pytest.raises(ValueError, match="at least two"):
        fit_stack([first], home, home / "models" / "bad")
    assert not (home / "models" / "bad").exists()


def test_zero_shot_member_is_the_untouched_backbone_and_adds_no_training_pairs(home: Path) -> None:
    from safetensors.torch import load_file

    from simpair.models.tiny import build_tiny

    write_toy_home(home)
    bi = _train(home, "sts", "bi", "cosent")
    out = fit_stack([bi], home, home / "models" / "with-zero-shot", zero_shot=True)

    spec = json.loads((out / "stack.json").read_text())
    assert spec["members"] == [f"members/0-{bi.name}", "members/1-zero-shot-0"]
    assert spec["features"][:2] == ["member:0", "member:1"]
    zero = out / "members" / "1-zero-shot-0"
    assert json.loads((zero / "simpair.json").read_text())["objective"] == "zero-shot"
    untouched = build_tiny("bi", seed=0)[0].model.state_dict()
    saved = load_file(str(zero / "model.safetensors"))
    for name, tensor in saved.items():
        assert torch.equal(tensor, untouched[name]), name
    trained = load_file(str(bi / "model.safetensors"))
    assert any(not torch.equal(trained[n], saved[n]) for n in saved)  # a different view than the member

    # the stack's training pairs: the trained member's, plus the dev pairs its combiner learnt from
    dev_lines = {f"stsb\tdev\t{i}" for i in (out / "dev_pair_ids.txt").read_text().split()}
    stack_lines = set((out / "train_pairs.txt").read_text().splitlines())
    assert stack_lines == set((bi / "train_pairs.txt").read_text().splitlines()) | dev_lines
    metrics = json.loads((out / "metrics.json").read_text())
    assert [m["member"] for m in metrics["members_dev"]] == [bi.name, "zero-shot-0"]
    a, b = _dev(home, bi)
    assert load_predictor(out).predict(a, b)["score"].shape == (len(a),)

    with pytest.raises(ValueError, match="a soup averages trained weights only"):
        StackConfig(name="s", task="sts", members=["x.yaml"], combine="soup", zero_shot=True)
    with pytest.raises(ValueError, match="at least two"):
        fit_stack([bi], home, home / "models" / "alone")


def _member_yaml(path: Path, task: str, kind: str, objective: str) -> str:
    path.write_text(yaml.safe_dump(_member(task, kind, objective, f"m-{kind}")))
    return path.name


def test_a_member_can_override_its_training_config_for_itself_only(tmp_path: Path) -> None:
    bi = _member_yaml(tmp_path / "bi.yaml", "sts", "bi", "cosent")
    stack = {
        "name": "recipe",
        "task": "sts",
        "combine": "soup",
        "members": [
            {"config": bi, "set": {"seed": 7, "name": "bi-s7"}},
            {"config": bi, "set": {"learning_rate": 1.2e-4, "length_grouping": False, "name": "bi-fast"}},
            bi,
        ],
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(stack))
    configs = StackConfig.from_yaml(tmp_path / "recipe.yaml").member_configs({"num_threads": 1})
    assert [(c.name, c.seed, c.learning_rate, c.length_grouping) for c in configs] == [
        ("bi-s7", 7, configs[2].learning_rate, True),
        ("bi-fast", configs[2].seed, 1.2e-4, False),
        ("m-bi", configs[2].seed, configs[2].learning_rate, True),
    ]
    assert {c.num_threads for c in configs} == {1}  # the stack-wide override still reaches every member

    stack["members"][0]["set"] = {"learning_rate": "fast"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(stack))
    with pytest.raises(ValueError, match="member bi.yaml set .*learning_rate"):
        StackConfig.from_yaml(tmp_path / "bad.yaml").member_configs()
    nested = {"name": "outer", "task": "sts", "members": [{"config": "recipe.yaml", "set": {"seed": 1}}, bi]}
    (tmp_path / "outer.yaml").write_text(yaml.safe_dump(nested))
    with pytest.raises(ValueError, match="a nested stack sets its own"):
        StackConfig.from_yaml(tmp_path / "outer.yaml").member_configs()


def test_stack_config_trains_its_members_then_stacks_from_the_cli(home: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simpair.cli import app

    write_toy_home(home)
    configs = tmp_path / "configs"
    configs.mkdir()
    members = [
        _member_yaml(configs / "bi.yaml", "sts", "bi", "cosent"),
        _member_yaml(configs / "cross.yaml", "sts", "cross", "bce"),
    ]
    stack = {
        "name": "toy-stack",
        "task": "sts",
        "members": members,
        "evaluate_on": [{"dataset": "stsb", "split": "test"}],
    }
    (configs / "stack.yaml").write_text(yaml.safe_dump(stack))
    runner = CliRunner()
    result = runner.invoke(
        app, ["stack", "--config", str(configs / "stack.yaml"), "--home", str(home), "--set", "num_threads=1"]
    )
    assert result.exit_code == 0, result.output
    [stacked] = [p for p in (home / "models").glob("toy-stack-*") if p.is_dir()]
    assert {p.name.split("-")[0] for p in (home / "models").iterdir()} >= {
        "m",
        "toy",
    }  # members are models too
    assert load_predictor(stacked).kind == "stacked"
    assert "stsb/test" in result.output and "spearman" in result.output

    soup = {"name": "toy-soup", "task": "sts", "members": [members[0]], "seeds": [1, 2], "combine": "soup"}
    (configs / "soup.yaml").write_text(yaml.safe_dump(soup))
    souped = runner.invoke(app, ["stack", "--config", str(configs / "soup.yaml"), "--home", str(home)])
    assert souped.exit_code == 0, souped.output
    [soup_dir] = [p for p in (home / "models").glob("toy-soup-*") if p.is_dir()]
    assert load_predictor(soup_dir).kind == "bi"  # one model, not a stack
    assert {p.name.rsplit("-", 1)[0] for p in (home / "models").glob("m-bi-s*")} == {"m-bi-s1", "m-bi-s2"}

    # `simpair soup --config` is the soup's own name for the same path; it refuses a stack config
    out = tmp_path / "soup-by-name"
    by_name = runner.invoke(
        app, ["soup", "--config", str(configs / "soup.yaml"), "--home", str(home), "--out", str(out)]
    )
    assert by_name.exit_code == 0, by_name.output
    assert load_predictor(out).kind == "bi" and "soup-by-name" in by_name.output
    not_soup = runner.invoke(
        app, ["soup", "--config", str(configs / "stack.yaml"), "--home", str(home)], env={"COLUMNS": "500"}
    )
    assert not_soup.exit_code == 2 and "simpair stack --config" in not_soup.output

    stack["members"] = [members[0], _member_yaml(configs / "para.yaml", "paraphrase", "cross", "bce")]
    (configs / "bad.yaml").write_text(yaml.safe_dump(stack))
    before = set((home / "models").iterdir())
    bad = runner.invoke(
        app, ["stack", "--config", str(configs / "bad.yaml"), "--home", str(home)], env={"COLUMNS": "500"}
    )
    assert bad.exit_code == 2 and "para.yaml: trains task 'paraphrase'" in bad.output
    assert set((home / "models").iterdir()) == before  # refused before training anything


def test_one_walk_trains_every_config_at_once_then_combines_nested_stacks_bottom_up(tmp_path: Path) -> None:
    from simpair.ensemble.train import build_stack

    configs, _ = _soup_and_cross_configs(tmp_path / "home", tmp_path, write_home=False)
    calls: list[object] = []

    def train_all(train_configs: list[TrainConfig]) -> list[Path]:
        calls.append([c.name for c in train_configs])
        return [Path(c.name) for c in train_configs]

    def combine(stack: StackConfig, dirs: list[Path]) -> Path:
        calls.append((stack.name, [d.name for d in dirs]))
        return Path(stack.name)

    out = build_stack(StackConfig.from_yaml(configs / "best.yaml"), train_all, combine, {"num_threads": 1})
    assert out == Path("toy-best")
    assert calls == [
        ["m-bi-s1", "m-bi-s2", "m-cross"],  # one call: every training config can run side by side
        ("toy-soup", ["m-bi-s1", "m-bi-s2"]),  # the nested soup first
        ("toy-best", ["toy-soup", "m-cross"]),
    ]


def _soup_and_cross_configs(
    home: Path, tmp_path: Path, write_home: bool = True, **stack_fields: object
) -> tuple[Path, dict[str, object]]:
    """A toy home and configs/best.yaml: a two-seed bi-encoder soup and a cross-encoder as members."""
    if write_home:
        write_toy_home(home)
    configs = tmp_path / "configs"
    configs.mkdir()
    bi = _member_yaml(configs / "bi.yaml", "sts", "bi", "cosent")
    cross = _member_yaml(configs / "cross.yaml", "sts", "cross", "bce")
    soup = {"name": "toy-soup", "task": "sts", "members": [bi], "seeds": [1, 2], "combine": "soup"}
    (configs / "soup.yaml").write_text(yaml.safe_dump(soup))
    stack = {"name": "toy-best", "task": "sts", "members": ["soup.yaml", cross], **stack_fields}
    (configs / "best.yaml").write_text(yaml.safe_dump(stack))
    return configs, stack


def test_a_soup_config_is_one_member_of_a_stack_config(home: Path, tmp_path: Path) -> None:
    from simpair.ensemble import train_stack

    configs, stack = _soup_and_cross_configs(home, tmp_path, zero_shot=True)
    cross = stack["members"][1]

    config = StackConfig.from_yaml(configs / "best.yaml")
    assert [c.name for c in config.member_configs({"num_threads": 1})] == ["m-bi-s1", "m-bi-s2", "m-cross"]
    dump = config.full_dump()
    assert dump["members"][0]["stack"]["combine"] == "soup" and len(dump["members"][0]["members"]) == 2

    result = train_stack(config, home, {"num_threads": 1})
    spec = json.loads((result.model_dir / "stack.json").read_text())
    names = [m.split("-", 1)[1].rsplit("-", 1)[0] for m in spec["members"]]
    assert names == ["toy-soup", "m-cross", "zero-shot"]
    souped = json.loads((result.model_dir / spec["members"][0] / "simpair.json").read_text())
    assert souped["kind"] == "bi" and len(souped["soup_of"]) >= 1
    assert load_predictor(result.model_dir).kind == "stacked"

    (configs / "loop.yaml").write_text(yaml.safe_dump({**stack, "members": ["loop.yaml", cross]}))
    with pytest.raises(ValueError, match="cycle"):
        StackConfig.from_yaml(configs / "loop.yaml").member_items()
    (configs / "seeded.yaml").write_text(yaml.safe_dump({**stack, "seeds": [1, 2]}))
    with pytest.raises(ValueError, match="a nested stack sets its own"):
        StackConfig.from_yaml(configs / "seeded.yaml").member_items()


def test_members_trained_side_by_side_in_processes_give_the_same_stack(home: Path, tmp_path: Path) -> None:
    from simpair.ensemble import train_stack

    configs, _ = _soup_and_cross_configs(home, tmp_path)
    config = StackConfig.from_yaml(configs / "best.yaml")

    one_by_one = train_stack(config, home, {"num_threads": 1})
    side_by_side = train_stack(config, home, {"num_threads": 1}, jobs=2)
    assert set(side_by_side.member_dirs).isdisjoint(one_by_one.member_dirs)  # trained again, not reused
    assert [d.name.rsplit("-", 1)[0] for d in side_by_side.member_dirs] == ["toy-soup", "m-cross"]
    for first, second in zip(one_by_one.member_dirs, side_by_side.member_dirs, strict=True):
        before = json.loads((first / "metrics.json").read_text())
        after = json.loads((second / "metrics.json").read_text())
        assert after["dev"]["spearman"] == pytest.approx(before["dev"]["spearman"], abs=1e-6)
    assert side_by_side.metrics["dev"]["spearman"] == pytest.approx(
        one_by_one.metrics["dev"]["spearman"], abs=1e-6
    )
    texts_a, texts_b = _dev(home, one_by_one.member_dirs[1])
    np.testing.assert_allclose(
        load_predictor(side_by_side.model_dir).predict(texts_a, texts_b)["score"],
        load_predictor(one_by_one.model_dir).predict(texts_a, texts_b)["score"],
        atol=1e-5,
    )


def test_a_member_failing_in_its_process_names_itself_and_keeps_the_others(
    home: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from simpair.cli import app

    write_toy_home(home)
    configs = tmp_path / "configs"
    configs.mkdir()
    bi = _member_yaml(configs / "bi.yaml", "sts", "bi", "cosent")
    gpu = _member("sts", "cross", "bce", "m-gpu", device="cuda:0")  # no GPU here: fails inside the worker
    (configs / "gpu.yaml").write_text(yaml.safe_dump(gpu))
    stack = {"name": "toy-gpu", "task": "sts", "members": [bi, "gpu.yaml"]}
    (configs / "stack.yaml").write_text(yaml.safe_dump(stack))
    result = CliRunner().invoke(
        app,
        ["stack", "--config", str(configs / "stack.yaml"), "--home", str(home), "--jobs", "2"],
        env={"COLUMNS": "500"},
    )
    assert result.exit_code == 1
    assert "stack member 'm-gpu' failed" in result.output
    models = {p.name.rsplit("-", 1)[0] for p in (home / "models").iterdir()}
    assert "m-bi" in models and "toy-gpu" not in models  # the healthy member is kept; no stack


def test_a_training_in_its_process_past_its_limit_is_stopped_and_named(home: Path) -> None:
    """Side by side, Prefect cannot stop a task in a worker thread: the training process is stopped here.

    What is counted, not timed: the worker processes the training started (one) and how many of them
    are still running once `train_in_process` has raised (none), and the model it would save on
    finishing its 1000 epochs (none). Workers are the fork server's children, so a thread watches this
    process's grandchildren while the training runs.
    """
    import contextlib
    import threading

    import psutil

    from simpair.registry.faults import is_transient
    from simpair.tasks.training import side_by_side_train_task, train_task
    from simpair.training.workers import TRAIN_TIMEOUT_SECONDS, TrainingTimedOut, train_in_process

    def workers() -> set[psutil.Process]:
        found = set()
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.NoSuchProcess):  # a child that just ended
                found.update(child.children())
        return found

    before = workers()
    started: set[psutil.Process] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            started.update(workers() - before)

    watcher = threading.Thread(target=watch, daemon=True)
    write_toy_home(home)
    config = TrainConfig.model_validate(
        _member("sts", "bi", "cosent", "m-slow", num_threads=1, epochs=1000, early_stopping_patience=None)
    )
    watcher.start()
    try:
        with pytest.raises(TrainingTimedOut, match="training m-slow ran past its limit of 2 s") as stopped:
            train_in_process(config, home, timeout=2)
    finally:
        done.set()
        watcher.join()
    assert not is_transient(stopped.value)  # the night does not run it for hours again
    assert len(started) == 1  # one training, one worker
    for worker in started:  # stopped, not left to finish its epochs
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    assert not (home / "models").exists() or not list((home / "models").glob("m-slow*"))
    assert train_task.timeout_seconds == TRAIN_TIMEOUT_SECONDS
    assert side_by_side_train_task().timeout_seconds is None


SHIPPED_CONFIGS = sorted(settings.configs_dir().rglob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED_CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_validates(path: Path) -> None:
    """A typo in a shipped config must fail here, not at 2 a.m. in the nightly."""
    from simpair.nightly.profile import load_profile

    if path.name.startswith("nightly"):
        profile = load_profile(str(path))
        for plan in profile.tasks.values():
            assert plan.config_path().is_file()
    elif is_stack_config(path):
        stack = StackConfig.from_yaml(path)
        assert len(stack.member_configs()) + int(stack.zero_shot) >= 2
    else:
        TrainConfig.from_yaml(path)


def test_greedy_soup_of_two_seeds_is_one_model_never_worse_on_dev(home: Path) -> None:
    from safetensors.torch import load_file

    write_toy_home(home)
    first = _train(home, "sts", "bi", "cosent", name="seed-1", seed=1)
    second = _train(home, "sts", "bi", "cosent", name="seed-2", seed=2)
    out = fit_soup([first, second], home, home / "models" / "soup")
    predictor = load_predictor(out)
    assert predictor.kind == "bi" and predictor.meta.calibration is not None  # refitted on dev for the soup
    soup = json.loads((out / "metrics.json").read_text())
    singles = soup["soup"]["ingredients_dev"]
    assert soup["dev"]["spearman"] >= max(singles.values()) - 1e-9  # greedy: dev can only improve
    kept = [{"seed-1": first, "seed-2": second}[name.rsplit("-", 1)[0]] for name in soup["soup"]["kept"]]
    weights = [load_file(str(d / "model.safetensors")) for d in kept]
    souped = load_file(str(out / "model.safetensors"))
    for key, value in souped.items():
        if value.is_floating_point():
            torch.testing.assert_close(value, torch.stack([w[key] for w in weights]).mean(0))
    cross = _train(home, "sts", "cross", "bce")
    with pytest.raises(ValueError, match="soup ingredients must"):
        fit_soup([first, cross], home, home / "models" / "bad-soup")
