"""Tracking and registry against the embedded store (SQLite under tmp).

Real MLflow everywhere: runs, registered versions, aliases, the pyfunc loaded back, `mlflow models
predict` as a subprocess. The same code against a real `mlflow server` (started on 127.0.0.1, then
killed) is exercised in tests/test_nightly.py, where the Prefect retries around it matter too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import polars as pl
import pytest
from registry_helpers import MLFLOW_BIN, one_torch_thread, tiny_model  # noqa: F401 - fixture
from typer.testing import CliRunner

from simpair.cli import app
from simpair.ingest import run_ingest
from simpair.registry import CorruptModel, ModelNotFound, registry, resolve_model, tracking
from simpair.registry.record import mark_challenger, register_trained_model
from simpair.runtime.loader import load_predictor
from simpair.selection.promotion import promote_manual

PAIRS = pd.DataFrame(
    {
        "text_a": ["A man is playing a guitar.", "The cat sat.", "Stocks fell sharply on Monday.", ""],
        "text_b": [
            "Someone plays the guitar.",
            "A dog barked loudly at night.",
            "Shares dropped on Monday.",
            "x",
        ],
    }
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    home = tmp_path_factory.mktemp("ingested") / "home"
    report = run_ingest(sources=shared_data, home=home)
    assert report.ok, report.headline()
    return home


@pytest.fixture
def store(ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh embedded MLflow store for this test, over the shared ingested datasets."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("SIMPAIR_HOME", str(ingested))
    return ingested


def _register(home: Path, tmp: Path, task: str = "paraphrase", seed: int = 0, flow_tags: dict | None = None):
    model_dir = tiny_model(
        tmp / f"{task}-{seed}", home, task=task, kind="cross" if task == "paraphrase" else "bi", seed=seed
    )
    config = {
        "name": f"tiny-{task}",
        "task": task,
        "epochs": 1,
        "train": [{"dataset": "msrp", "split": "train"}],
    }
    history = [{"epoch": 1, "train_loss": 0.7, "dev_accuracy": 0.5}, {"epoch": 2, "train_loss": 0.6}]
    return register_trained_model(
        home,
        model_dir,
        config,
        {"dev_accuracy": 0.5},
        history,
        {"msrp/test/f1": 0.4},
        eval_artifacts=[model_dir / "metrics.json"],
        flow_tags=flow_tags,
    ), model_dir


def test_training_run_records_everything_and_registration_moves_no_alias(store: Path, tmp_path: Path) -> None:
    registered, _ = _register(store, tmp_path, flow_tags={"prefect.flow_run_id": "abc-123"})
    client = registry.client(store)
    run = client.get_run(registered.run_id)
    assert run.data.params["name"] == "tiny-paraphrase"
    assert json.loads(run.data.params["train"]) == [{"dataset": "msrp", "split": "train"}]
    assert [m.value for m in client.get_metric_history(registered.run_id, "train_loss")] == [0.7, 0.6]
    assert run.data.metrics["eval.msrp/test/f1"] == pytest.approx(0.4)
    assert run.data.tags["prefect.flow_run_id"] == "abc-123"
    assert len(run.data.tags["mlflow.source.git.commit"].split("-")[0]) == 40
    inputs = {d.dataset.name: d.dataset for d in run.inputs.dataset_inputs}
    version = registered and Path(store / "datasets" / "msrp" / "CURRENT").read_text().strip()
    assert inputs["msrp-train"].digest == version[:36]
    assert (
        inputs["msrp-train"].source.endswith("train.parquet")
        or "train.parquet" in inputs["msrp-train"].source
    )
    # schema and size from the Parquet footer: every column typed, nullability from its statistics
    train = pl.read_parquet(store / "datasets" / "msrp" / version / "train.parquet")
    assert json.loads(inputs["msrp-train"].profile)["num_rows"] == train.height
    columns = {c["name"]: c for c in json.loads(inputs["msrp-train"].schema)["mlflow_colspec"]}
    assert list(columns) == train.columns
    assert columns["text_a"]["type"] == "string" and columns["label"]["type"] in ("integer", "long")
    assert columns["pair_id"]["required"]  # statistics written and no nulls
    assert not columns["score"]["required"] and train["score"].null_count()  # MSRP has no graded score
    # "required" is never claimed for a column that holds nulls (nor where the file keeps no statistics)
    assert all(not spec["required"] or train[name].null_count() == 0 for name, spec in columns.items())
    artifacts = {a.path for a in client.list_artifacts(registered.run_id, "model_files")}
    assert {"model_files/metrics.json", "model_files/simpair.json"} <= artifacts
    assert client.list_artifacts(registered.run_id, "evaluation")

    mv = client.get_model_version(registered.name, registered.version)
    assert mv.tags["dataset_version.msrp"] == version
    assert mv.tags["config_hash"] == tracking.config_hash(
        json.loads(
            json.dumps(
                {
                    "name": "tiny-paraphrase",
                    "task": "paraphrase",
                    "epochs": 1,
                    "train": [{"dataset": "msrp", "split": "train"}],
                }
            )
        )
    )
    assert mv.tags["metric.dev_accuracy"] == "0.5"
    assert not mv.aliases, "registration alone must not move any alias"
    mark_challenger(store, registered)
    assert str(client.get_model_version_by_alias(registered.name, "challenger").version) == registered.version


def test_pyfunc_gives_the_same_numbers_as_the_predictor(store: Path, tmp_path: Path) -> None:
    for task in ("paraphrase", "sts"):
        registered, model_dir = _register(store, tmp_path, task=task)
        mark_challenger(store, registered)
        model = mlflow.pyfunc.load_model(f"models:/{registered.name}@challenger")
        out = model.predict(PAIRS)
        expected = load_predictor(model_dir).predict(PAIRS.text_a.tolist(), PAIRS.text_b.tolist())
        np.testing.assert_allclose(out["score"].to_numpy(), expected["score"], rtol=1e-6)
        flavor = model.metadata.flavors["python_function"]
        assert "model_code_path" in flavor  # models-from-code: nothing is unpickled at load time
        local = Path(mlflow.artifacts.download_artifacts(f"models:/{registered.name}@challenger"))
        assert list(local.rglob("*.safetensors")) and not list(local.rglob("*.pkl"))
        inputs = model.metadata.get_input_schema().input_names()
        outputs = model.metadata.get_output_schema().input_names()
        assert inputs == ["text_a", "text_b"]
        if task == "paraphrase":
            assert outputs == ["score", "probability", "label"]
            np.testing.assert_array_equal(out["label"].to_numpy(), expected["label"])
        else:
            assert outputs == ["score"] and list(out.columns) == ["score"]
        with pytest.raises(Exception, match="text_b"):
            model.predict(PAIRS[["text_a"]])
        # `simpair predict` on the registry reference prints the same numbers as the pyfunc
        cli = CliRunner().invoke(
            app,
            [
                "predict",
                PAIRS.text_a[0],
                PAIRS.text_b[0],
                "--model",
                f"{registered.name}@challenger",
                "--home",
                str(store),
                "--json",
                "-",
            ],
        )
        assert cli.exit_code == 0, cli.output
        printed = json.loads(cli.stdout)  # `--json -`: stdout holds the JSON only
        assert printed["score"] == pytest.approx(float(out["score"][0]), rel=1e-6)


@pytest.mark.slow
def test_mlflow_models_predict_cli_works_offline_on_the_champion(store: Path, tmp_path: Path) -> None:
    registered, model_dir = _register(store, tmp_path)
    promote_manual(store, registered.name, registered.version, reason="test", by="test")
    csv = tmp_path / "pairs.csv"
    PAIRS.to_csv(csv, index=False)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "NO_PROXY": "*", "no_proxy": "*"}
    done = subprocess.run(
        [
            str(MLFLOW_BIN),
            "models",
            "predict",
            "-m",
            f"models:/{registered.name}@champion",
            "-i",
            str(csv),
            "-t",
            "csv",
            "--env-manager",
            "local",
            "-o",
            str(tmp_path / "out.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "out.json").read_text())["predictions"]
    expected = load_predictor(model_dir).predict(PAIRS.text_a.fillna("").tolist(), PAIRS.text_b.tolist())
    assert [r["label"] for r in rows] == expected["label"].tolist()
    np.testing.assert_allclose([r["score"] for r in rows], expected["score"], rtol=1e-5)


def test_resolve_model_pins_versions_and_reports_missing_or_corrupt_artifacts(
    store: Path, tmp_path: Path
) -> None:
    first, _ = _register(store, tmp_path, seed=0)
    second, _ = _register(store, tmp_path, seed=1)
    mark_challenger(store, second)
    promote_manual(store, first.name, first.version, reason="first", by="test")
    champ = resolve_model("simpair-paraphrase@champion", store)
    assert (champ.version, champ.run_id) == (first.version, first.run_id)
    assert load_predictor(champ.local_dir).task == "paraphrase"
    assert resolve_model("models:/simpair-paraphrase/2", store).version == "2"
    assert resolve_model("simpair-paraphrase", store).version == first.version  # bare name = champion
    with pytest.raises(ModelNotFound, match="no such alias"):
        resolve_model("simpair-paraphrase@nope", store)
    with pytest.raises(ModelNotFound):
        resolve_model("simpair-sts@champion", store)

    # delete the weights from the artifact store itself (and the local cache): a real corruption
    source = registry.client(store).get_model_version(second.name, second.version).source  # models:/m-<id>
    model_id = source.rsplit("/", 1)[-1]
    weights = [p for p in (store / "mlflow" / "artifacts").rglob("model.safetensors") if model_id in str(p)]
    assert len(weights) == 1, (source, weights)
    weights[0].unlink()
    shutil.rmtree(store / registry.CACHE_DIR, ignore_errors=True)
    with pytest.raises(CorruptModel, match="incomplete|cannot"):
        resolve_model(f"simpair-paraphrase/{second.version}", store)


def test_manual_promotion_and_rollback_follow_the_recorded_history(store: Path, tmp_path: Path) -> None:
    versions = [_register(store, tmp_path, seed=s)[0] for s in range(3)]
    name = versions[0].name
    for v in versions:
        promote_manual(store, name, v.version, reason=f"promote {v.version}", by="test")
    c = registry.client(store)
    assert registry.version_for(c, name, "champion") == "3"
    assert registry.rollback(c, name, reason="bad night") == ("3", "2")
    assert registry.rollback(c, name) == ("2", "1")
    with pytest.raises(ValueError, match="nothing to roll back"):
        registry.rollback(c, name)
    history = registry.read_history(c, name)
    assert [(e.action, e.version) for e in history][-2:] == [("rollback", "2"), ("rollback", "1")]
    assert history[-2].reason == "bad night" and history[-2].previous == "3"
    with pytest.raises(ValueError, match="needs a --reason"):
        promote_manual(store, name, "2", reason="  ")


def test_rollback_all_rolls_back_every_model_and_names_the_one_it_cannot(store: Path, tmp_path: Path) -> None:
    paraphrase = [_register(store, tmp_path, task="paraphrase", seed=s)[0] for s in range(2)]
    sts = [_register(store, tmp_path, task="sts", seed=s)[0] for s in range(2)]
    for v in [*paraphrase, sts[0]]:  # sts has one champion only: nothing earlier to go back to
        promote_manual(store, v.name, v.version, reason="setup", by="test")

    def rollback(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["rollback", *args, "--home", str(store)], terminal_width=200)
        return result.exit_code, " ".join(result.output.split())  # rich wraps long lines

    result = CliRunner().invoke(
        app, ["rollback", "--task", "all", "--reason", "bad night", "--home", str(store)]
    )
    assert result.exit_code == 1, result.output
    assert "simpair-paraphrase: champion v2 -> v1 (rollback: bad night)" in result.stdout
    (line,) = result.stderr.splitlines()  # what could not be done, in one line
    assert (
        line.startswith("error: 1 of 2 model(s) not rolled back: simpair-sts")
        and "nothing to roll back to" in line
    )
    c = registry.client(store)
    assert registry.version_for(c, "simpair-paraphrase", "champion") == "1"
    assert registry.version_for(c, "simpair-sts", "champion") == "1"

    promote_manual(store, paraphrase[1].name, "2", reason="again", by="test")
    promote_manual(store, sts[1].name, "2", reason="second", by="test")
    code, out = rollback("--task", "all")
    assert code == 0, out
    assert "simpair-paraphrase: champion v2 -> v1" in out and "simpair-sts: champion v2 -> v1" in out
    assert [registry.version_for(c, n, "champion") for n in ("simpair-paraphrase", "simpair-sts")] == [
        "1",
        "1",
    ]
    code, out = rollback("--task", "nope")
    assert code != 0 and "--task" in out
