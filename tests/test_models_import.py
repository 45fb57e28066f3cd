"""`simpair models import`: a model the team already has becomes a registry version with its provenance,
takes `champion` when there is none, gets a threshold and precision verdict from a dev file, and the
promotion gate compares a trained challenger with it (real embedded MLflow store, real ingest).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import polars as pl
import pytest
import torch
from ingest_helpers import TOY_CONTRACT
from transformers import BertForSequenceClassification
from typer.testing import CliRunner

from simpair.catalog import Catalog
from simpair.cli import app
from simpair.ingest import run_ingest
from simpair.model_import import import_model
from simpair.models import ModelMetadata, save_tiny_model
from simpair.models.foreign import content_sha256
from simpair.models.tiny import _bundled_tokenizer, tiny_config
from simpair.registry import registry
from simpair.registry.imported import ImportRefused, stage
from simpair.registry.record import mark_challenger, register_trained_model
from simpair.runtime.loader import load_predictor
from simpair.selection.gate import GatePolicy
from simpair.selection.promotion import run_gate

WORDS = [
    "cat",
    "dog",
    "market",
    "stock",
    "fell",
    "rose",
    "man",
    "guitar",
    "plays",
    "music",
    "house",
    "car",
    "city",
    "river",
]


def _pairs(n: int, seed: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a = " ".join(rng.choices(WORDS, k=rng.randint(3, 8)))
        same = i % 2 == 0
        b = a if same else " ".join(rng.choices(WORDS, k=rng.randint(3, 8)))
        rows.append((a, b, int(same)))
    return rows


@pytest.fixture(scope="module")
def toy_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the `toy` dataset ingested (train and test of short binary pairs)."""
    root = tmp_path_factory.mktemp("import")
    src, contracts = root / "src" / "toy", root / "contracts"
    src.mkdir(parents=True)
    contracts.mkdir()
    (contracts / "toy.yaml").write_text(TOY_CONTRACT)
    for split, seed in (("train", 1), ("test", 2)):
        lines = ["label\ta\tb", *(f"{y}\t{a}\t{b}" for a, b, y in _pairs(40, seed))]
        (src / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    home = root / "home"
    assert run_ingest(sources=root / "src", home=home, contracts=contracts).ok
    return home


@pytest.fixture
def store(toy_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The ingested home with a fresh MLflow store per test."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("SIMPAIR_HOME", str(toy_home))
    return toy_home


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-label BERT classifier saved by transformers itself."""
    folder = tmp_path_factory.mktemp("cls") / "team-classifier"
    tokenizer = _bundled_tokenizer()
    torch.manual_seed(5)
    BertForSequenceClassification(tiny_config(len(tokenizer), num_labels=2)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_import_registers_provenance_and_takes_champion_then_challenger(
    store: Path, classifier: Path, tmp_path: Path
) -> None:
    code = CliRunner().invoke(
        app,
        ["models", "import", str(classifier), "--task", "paraphrase", "--home", str(store)],
        terminal_width=200,
    )
    assert code.exit_code == 0, code.output
    flat = " ".join(code.output.split())
    assert "registered simpair-paraphrase/1" in flat and "had no champion: v1 is the champion" in flat
    assert "no dev file: no threshold" in flat
    assert "Created version" not in code.output and "already exists" not in code.output  # MLflow's own lines
    c = registry.client(store)
    assert registry.version_for(c, "simpair-paraphrase", "champion") == "1"
    tags = c.get_model_version("simpair-paraphrase", "1").tags
    weights = sorted(p for p in classifier.iterdir() if p.suffix in (".safetensors", ".json"))
    assert tags["origin"] == "imported" and tags["import.source"] == str(classifier)
    assert tags["import.content_sha256"] == content_sha256(weights)
    assert tags["import.shape"] == "classifier" and tags["threshold"] == "none"
    assert tags["import.imported_at"].startswith("20")
    history = registry.read_history(c, "simpair-paraphrase")
    assert history[-1].by == "import" and history[-1].version == "1"
    # a second import, with a champion in place, is the challenger
    second = import_model(store, str(classifier), "paraphrase")
    assert (second.version, second.alias, second.previous_champion) == ("2", "challenger", "1")
    assert registry.version_for(c, "simpair-paraphrase", "challenger") == "2"
    with pytest.raises(ImportRefused, match="no such file, and not an ingested split"):
        import_model(store, str(classifier), "paraphrase", dev=str(tmp_path / "missing.csv"))


def test_a_dev_file_gives_a_threshold_and_a_precision_verdict(
    store: Path, classifier: Path, tmp_path: Path
) -> None:
    dev = tmp_path / "dev.csv"
    rows = _pairs(30, seed=7)
    pl.DataFrame(
        {"text_a": [r[0] for r in rows], "text_b": [r[1] for r in rows], "label": [r[2] for r in rows]}
    ).write_csv(dev)
    result = import_model(store, str(classifier), "paraphrase", dev=str(dev), alias="none")
    assert result.alias is None and result.threshold is not None and result.precision.startswith("auto: ")
    c = registry.client(store)
    tags = c.get_model_version(result.name, result.version).tags
    assert float(tags["threshold"]) == pytest.approx(result.threshold)
    assert tags["simpair.precision.dev_split"] == str(dev.resolve())
    assert tags["simpair.precision.chosen"] in ("fp32", "bf16", "int8") and "metric.dev.accuracy" in tags
    resolved = registry.resolve_model(f"{result.name}/{result.version}", store)
    meta = ModelMetadata.read(resolved.local_dir)
    assert meta.threshold_chosen and meta.threshold == pytest.approx(result.threshold)
    assert (resolved.local_dir / "precision_verdict.json").is_file()
    assert "label" in load_predictor(resolved.local_dir).predict(["a b"], ["a b"])
    # the adopted folder itself is untouched: still no threshold for `--model DIR`
    adopted = next(p for p in (store / "imported").iterdir() if p.name.startswith("team-classifier-"))
    assert not ModelMetadata.read(adopted).threshold_chosen


def test_the_gate_compares_a_trained_challenger_with_an_imported_champion(
    store: Path, classifier: Path, tmp_path: Path
) -> None:
    imported = import_model(store, str(classifier), "paraphrase")
    assert imported.alias == "champion"
    trained = save_tiny_model(tmp_path / "trained", task="paraphrase", kind="cross", seed=3)
    meta = ModelMetadata.read(trained)
    meta.dataset_versions = {"toy": Catalog(store).current_version("toy")}
    meta.train_datasets = ["toy/train"]
    meta.threshold = 0.0  # predicts "paraphrase" for all pairs: F1 2/3 on the balanced toy test split
    meta.write(trained)
    registered = register_trained_model(store, trained, {"name": "trained"}, {"dev": {"accuracy": 0.5}})
    mark_challenger(store, registered)
    decision = run_gate(store, "paraphrase", GatePolicy(primary="f1", margin=0.0), [("toy", "test")])
    assert decision.champion_version == imported.version and decision.champion is not None
    assert decision.champion_error is None and decision.zero_shot is None
    assert decision.champion["toy/test/evaluated"] == decision.challenger["toy/test/evaluated"] > 0
    tags = registry.client(store).get_model_version("simpair-paraphrase", registered.version).tags
    assert tags["gate.compared_with"] == imported.version and tags["gate.decision"] == decision.outcome


def test_stage_never_symlinks_weights(tmp_path: Path) -> None:
    """MLflow refuses a symlink resolving outside the logged folder: staging copies when it cannot link."""
    adopted = save_tiny_model(tmp_path / "adopted", task="paraphrase", kind="cross", seed=3)
    weights = next(adopted.glob("*.safetensors"))
    real = tmp_path / "elsewhere.safetensors"
    weights.rename(real)
    weights.symlink_to(real)  # what adoption leaves when the home is on another filesystem
    staged = stage(adopted, tmp_path / "staged", hardlink=False)
    copied = staged / weights.name
    assert not copied.is_symlink() and copied.read_bytes() == real.read_bytes()
    assert not any(p.is_symlink() for p in staged.rglob("*"))


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm, another filesystem")
def test_import_with_the_home_on_another_filesystem(
    classifier: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.stat("/dev/shm").st_dev == classifier.stat().st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the source")
    home = Path(tempfile.mkdtemp(prefix="simpair-home-", dir="/dev/shm"))
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
        monkeypatch.setenv("SIMPAIR_HOME", str(home))
        result = import_model(home, str(classifier), "paraphrase")
        assert (result.version, result.alias) == ("1", "champion")
        resolved = registry.resolve_model(f"{result.name}/{result.version}", home)
        assert "probability" in load_predictor(resolved.local_dir).predict(["a b"], ["a b"])
    finally:
        shutil.rmtree(home, ignore_errors=True)
