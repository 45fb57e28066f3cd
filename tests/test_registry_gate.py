"""The promotion gate and the registry CLI on a real ingested home and a real embedded MLflow store.

Models are tiny random ones, evaluated for real with `evaluate_model` on the MSRP test split (leaked
pairs excluded). Their decision thresholds are set to make outcomes certain without training: a
threshold above every probability predicts "not paraphrase" for all pairs (F1 = 0), a threshold of 0
predicts "paraphrase" for all (F1 ~ 0.80 on MSRP test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from registry_helpers import one_torch_thread, tiny_model  # noqa: F401 - fixture
from typer.testing import CliRunner

from simpair.cli import app
from simpair.evaluation.zero_shot_baseline import zero_shot_model
from simpair.ingest import run_ingest
from simpair.models import ModelMetadata, default_backbone
from simpair.registry import registry
from simpair.registry.record import mark_challenger, register_trained_model
from simpair.selection.gate import GatePolicy, metric
from simpair.selection.promotion import evaluate, gate_exclusions, run_gate

PARAPHRASE = GatePolicy(primary="f1", margin=0.005, guardrails={"accuracy": 0.01})
MSRP_TEST = [("msrp", "test")]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    home = tmp_path_factory.mktemp("gate") / "home"
    assert run_ingest(sources=shared_data, home=home).ok
    return home


@pytest.fixture
def store(ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("SIMPAIR_HOME", str(ingested))
    return ingested


def _model(path: Path, home: Path, threshold: float, seed: int = 0) -> Path:
    tiny_model(path, home, seed=seed)
    meta = ModelMetadata.read(path)
    meta.threshold = threshold
    meta.write(path)
    return path


def _register(home: Path, model_dir: Path):
    registered = register_trained_model(home, model_dir, {"name": model_dir.name}, {"dev": {"x": 1.0}})
    mark_challenger(home, registered)
    return registered


def _champion(home: Path) -> str | None:
    return registry.version_for(registry.client(home), "simpair-paraphrase", "champion")


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), terminal_width=200)
    return result.exit_code, result.output


@pytest.mark.slow
def test_gate_lifecycle_zero_shot_bar_promotion_margin_corrupt_champion_and_rollback(
    store: Path, tmp_path: Path
) -> None:
    home = str(store)
    c = registry.client(store)  # not MlflowClient(): a process-global URI from an earlier test would win
    # 1. first version, predicting "no" for everything: F1 0 cannot beat the zero-shot backbone
    v1 = _register(store, _model(tmp_path / "never", store, threshold=1.01))
    first = run_gate(store, "paraphrase", PARAPHRASE, MSRP_TEST)
    assert not first.promote and "does not beat the untrained backbone zero-shot" in first.reason
    assert metric(first.challenger, "f1") == 0.0 and metric(first.zero_shot, "f1") > 0.5
    excluded = len(gate_exclusions(store, MSRP_TEST)["msrp/test"])  # MSRP test pairs found in STS-B train
    assert excluded > 0 and first.excluded == {"msrp/test": excluded}
    # a model refit on STS-B dev also excludes the MSRP test pairs that sit there
    plain, with_dev = (gate_exclusions(store, MSRP_TEST, t)["msrp/test"] for t in ((), ["stsb/dev"]))
    assert plain < with_dev
    assert (
        first.challenger["msrp/test/evaluated"] == first.zero_shot["msrp/test/evaluated"] == 1725 - excluded
    )
    mv1 = c.get_model_version(v1.name, v1.version)
    assert mv1.tags["gate.decision"] == "rejected" and mv1.tags["gate.reason"] == first.reason
    assert "gate.zero_shot.msrp/test/f1" in mv1.tags and first.reason in mv1.description
    gate_run = c.get_run(mv1.tags["gate.run_id"])
    assert gate_run.data.metrics["promoted"] == 0.0 and "zero_shot/msrp/test/f1" in gate_run.data.metrics
    [evaluated] = gate_run.inputs.dataset_inputs  # lineage: the exact evaluation split version
    assert (
        evaluated.dataset.name == "msrp-test" and evaluated.dataset.digest == first.dataset_versions["msrp"]
    )
    assert _champion(store) is None

    # an operator bootstraps v1 as champion (the CLI insists on a reason)
    code, out = _cli("promote", "--task", "paraphrase", "--version", v1.version, "--home", home)
    assert code == 2 and "--reason" in out and _champion(store) is None  # a usage error
    code, out = _cli(
        "promote", "--task", "paraphrase", "--version", v1.version, "--reason", "bootstrap", "--home", home
    )
    assert code == 0, out
    assert _champion(store) == v1.version

    # 2. a challenger predicting "yes" for everything wins on F1 (accuracy rises too: guardrail holds)
    v2 = _register(store, _model(tmp_path / "always", store, threshold=0.0))
    second = run_gate(store, "paraphrase", PARAPHRASE, MSRP_TEST)
    assert second.promote, second.reason
    assert second.champion_version == v1.version and metric(second.champion, "f1") == 0.0
    assert _champion(store) == v2.version

    # 3. the same model again gains exactly 0: below the margin, champion stays
    _register(store, _model(tmp_path / "always-again", store, threshold=0.0))
    third = run_gate(store, "paraphrase", PARAPHRASE, MSRP_TEST)
    assert not third.promote and "below the margin" in third.reason
    assert third.challenger == third.champion
    assert _champion(store) == v2.version

    # 4. the champion's weights vanish from the artifact store: the gate reports it and holds the
    # challenger to the zero-shot bar instead. The challenger is v1 again (F1 0), which no bar lets
    # through, so the outcome is certain: rejected, and the champion alias stays where it was (moving
    # it off an unusable champion is an operator's rollback, step 5).
    model_id = c.get_model_version(v2.name, v2.version).source.rsplit("/", 1)[-1]
    weights = [p for p in (store / "mlflow" / "artifacts").rglob("model.safetensors") if model_id in str(p)]
    assert len(weights) == 1
    weights[0].unlink()
    mark_challenger(store, v1)
    fourth = run_gate(store, "paraphrase", PARAPHRASE, MSRP_TEST)
    assert (fourth.challenger_version, fourth.champion_version) == (v1.version, v2.version)
    assert fourth.champion is None and fourth.champion_error and "CorruptModel" in fourth.champion_error
    assert fourth.reason.startswith(f"champion v{v2.version} is unusable (CorruptModel")
    assert "does not beat the untrained backbone zero-shot" in fourth.reason and not fourth.promote
    assert metric(fourth.challenger, "f1") == 0.0 and metric(fourth.zero_shot, "f1") > 0.5
    assert _champion(store) == v2.version
    mv1 = c.get_model_version(v1.name, v1.version)
    assert mv1.tags["gate.decision"] == "rejected" and mv1.tags["gate.reason"] == fourth.reason

    # 5. `simpair models` shows it all; `simpair rollback` walks the recorded history back
    code, out = _cli("models", "--home", home)
    assert code == 0 and "simpair-paraphrase" in out and "champion" in out and "promoted" in out, out
    code, out = _cli("rollback", "--task", "paraphrase", "--reason", "regression seen", "--home", home)
    assert code == 0, out
    assert _champion(store) == v1.version
    history = registry.read_history(registry.client(store), "simpair-paraphrase")
    assert history[-1].action == "rollback" and history[-1].reason == "regression seen"


@pytest.mark.slow
def test_zero_shot_bar_of_the_real_backbone_on_sts(ingested: Path, tmp_path: Path) -> None:
    """The default profile's first-version bar: all-MiniLM-L6-v2 as a bi-encoder, cosine, no training."""
    zs = zero_shot_model(default_backbone(), "sts", ingested)
    stsb = [("stsb", "test")]
    result = evaluate(zs, ingested, stsb, gate_exclusions(ingested, stsb), tmp_path / "zs")
    assert 0.75 < metric(result.metrics, "spearman") < 0.9  # SBERT-class models: ~0.82 on STS-B test
