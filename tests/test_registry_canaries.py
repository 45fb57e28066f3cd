"""Off-domain canaries in the promotion gate, end to end on a toy home and a real embedded MLflow store.

The canary is a graded split in another domain (food and places, not the toy news sentences) on which
even the untrained tiny backbone has signal: near-identical pairs score 1, same-topic pairs 0.4 and
unrelated ones 0, and mean-pooled cosines of a random BERT already rank them. The challenger is a real
training run, over-fitted on purpose (a learning rate fifty times the smoke profile's): it keeps the toy
paraphrase task but loses that ranking. The champion predicts "not paraphrase" for everything (F1 0),
so in-domain the challenger clearly wins, and only the canary can stop it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from registry_helpers import one_torch_thread, tiny_model  # noqa: F401 - fixture
from test_training_toydata import make_pairs, refresh_leakage, write_dataset, write_toy_home
from typer.testing import CliRunner

from simpair.cli import app
from simpair.cli.models_cmd import canary_summary
from simpair.models import ModelMetadata
from simpair.registry import registry
from simpair.registry.record import mark_challenger, register_trained_model
from simpair.selection.gate import Canary, GatePolicy, metric
from simpair.selection.promotion import canary_exclusions, promote_manual, run_gate
from simpair.training.config import TrainConfig
from simpair.training.trainer import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FOODS = ["soup", "bread", "cheese", "apples", "rice", "coffee", "tea", "pasta", "salad", "cake"]
PLACES = ["kitchen", "garden", "market", "bakery", "farm", "harbour", "valley", "station", "museum", "forest"]
OTHER = [
    "the violin concert was cancelled because of heavy snow",
    "three goals were scored in the final minute",
    "the satellite reached orbit on tuesday",
    "a new law on parking fees takes effect",
]


def write_canary(home: Path) -> None:
    """36 graded off-domain pairs, plus one pair copied from msrp train (a leak the gate must exclude)."""
    rng = random.Random(7)
    rows = []
    for i in range(36):
        a = f"fresh {rng.choice(FOODS)} served in the {rng.choice(PLACES)} near the {rng.choice(PLACES)}"
        if i % 3 == 0:
            rows.append((a, a + " today", 1.0))
        elif i % 3 == 1:
            rows.append((a, f"fresh {rng.choice(FOODS)} sold at the {rng.choice(PLACES)}", 0.4))
        else:
            rows.append((a, rng.choice(OTHER), 0.0))
    leaked_a, leaked_b, _ = make_pairs(48, 1, graded=False)[0]  # write_toy_home's msrp train, first pair
    rows.append((leaked_a, leaked_b, 1.0))
    write_dataset(home, "canary", "c1", {"test": ("test", rows)}, graded=True)
    refresh_leakage(home)


def overfitted_challenger(home: Path) -> Path:
    config = TrainConfig(
        name="overfit",
        task="paraphrase",
        kind="bi",
        objective="online_contrastive",
        backbone="tiny",
        train=[{"dataset": "msrp", "split": "train"}],
        dev={"split": None, "carve_fraction": 0.2, "carve_seed": 13},
        max_length=48,
        epochs=1,
        batch_size=8,
        learning_rate=0.05,
        warmup_ratio=0.0,
        max_steps=6,
        progress=False,
        num_threads=1,
        seed=42,
        # the off-domain damage asserted below was sized in fp32; `auto` trains in bf16 where native
        precision="fp32",
    )
    return train(config, home).model_dir


def _register(home: Path, model_dir: Path) -> str:
    registered = register_trained_model(home, model_dir, {"name": model_dir.name}, {"dev": {"x": 1.0}})
    mark_challenger(home, registered)
    return registered.version


def test_canary_rejects_an_in_domain_winner_that_lost_the_backbones_off_domain_ranking(
    home: Path, tmp_path: Path
) -> None:
    write_toy_home(home)
    write_canary(home)
    never = tiny_model(tmp_path / "never", home)  # F1 0 in-domain: any sensible challenger beats it
    meta = ModelMetadata.read(never)
    meta.threshold = 1.01
    meta.write(never)
    v1 = _register(home, never)
    promote_manual(home, "simpair-paraphrase", v1, reason="bootstrap")
    challenger_dir = overfitted_challenger(home)
    v2 = _register(home, challenger_dir)

    policy = GatePolicy(
        primary="f1",
        margin=0.005,
        guardrails={"accuracy": 0.01},
        canaries=[Canary(dataset="canary", split="test")],
    )
    decision = run_gate(home, "paraphrase", policy, [("msrp", "test")])

    # in-domain the challenger wins clearly over the champion...
    assert decision.champion_version == v1 and decision.zero_shot is None
    assert metric(decision.challenger, "f1") - metric(decision.champion, "f1") > 0.5
    # ...but on the canary (graded split, paraphrase task: Spearman) it fell below the untrained backbone
    [canary] = decision.canaries
    assert canary.label == "canary/test" and canary.metric == "spearman"
    assert canary.zero_shot > 0.5  # the random tiny backbone does rank the off-domain pairs
    assert canary.challenger < canary.zero_shot - 0.05 and not canary.passed
    assert not decision.promote
    assert decision.reason.startswith(
        f"canary canary/test: spearman {canary.challenger:.4f} is {canary.zero_shot - canary.challenger:.4f} "
        f"below the untrained backbone's {canary.zero_shot:.4f} (margin 0.0200)"
    )
    assert f"beats champion v{v1}" in decision.reason  # the in-domain verdict is kept on record
    assert decision.excluded["canary/test"] == 1  # the pair that sits in msrp train
    assert decision.dataset_versions["canary"] == "c1"
    assert registry.version_for(registry.client(home), "simpair-paraphrase", "champion") == v1

    c = registry.client(home)
    mv = c.get_model_version("simpair-paraphrase", v2)
    assert mv.tags["gate.decision"] == "rejected"
    assert float(mv.tags["gate.canary.canary/test.spearman.challenger"]) == pytest.approx(
        canary.challenger, 1e-5
    )
    assert float(mv.tags["gate.canary.canary/test.spearman.zero_shot"]) == pytest.approx(
        canary.zero_shot, 1e-5
    )
    assert mv.tags["gate.leakage_excluded.canary/test"] == "1"
    assert "| canary/test | spearman |" in mv.description and "| FAIL |" in mv.description
    gate_run = c.get_run(mv.tags["gate.run_id"])
    assert gate_run.data.metrics["canary/canary/test/spearman/passed"] == 0.0
    assert "canary/canary/test/spearman/zero_shot" in gate_run.data.metrics
    summary = canary_summary(mv.tags)
    assert summary.startswith("canary/test spearman ") and summary.endswith(" FAIL")
    result = CliRunner().invoke(app, ["models", "--home", str(home)], terminal_width=250)
    assert result.exit_code == 0 and "FAIL" in result.output, result.output

    # a canary drawn from a split the challenger trained on: its trained pairs are left out too
    trained = {
        line.split("\t")[2]
        for line in (challenger_dir / "train_pairs.txt").read_text().splitlines()
        if line.startswith("msrp\ttrain\t")
    }
    assert trained and canary_exclusions(home, [("msrp", "train")], challenger_dir)["msrp/train"] >= trained


def test_a_graded_model_on_a_binary_split_gets_threshold_free_figures_only(
    home: Path, tmp_path: Path
) -> None:
    """An STS model never tunes a threshold, so the gate compares it on a binary canary by ROC-AUC alone."""
    from simpair.evaluation.splits import evaluate_model
    from simpair.selection.promotion import evaluate

    write_toy_home(home)
    sts = tiny_model(tmp_path / "sts", home, task="sts", kind="bi")
    gate_figures = evaluate(sts, home, [("msrp", "test")], {}, tmp_path / "gate").metrics
    assert set(gate_figures) == {"msrp/test/evaluated", "msrp/test/n", "msrp/test/roc_auc"}
    report = evaluate_model(sts, home, [("msrp", "test")], out_dir=tmp_path / "ev").report_path.read_text()
    assert "no tuned threshold (graded model)" in report and "chosen on dev" not in report
