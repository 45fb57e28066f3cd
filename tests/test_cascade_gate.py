"""The promotion gate sees a bi -> cross cascade as the model: it is evaluated as a whole against the
zero-shot bar and the champion, the report shows the share of pairs its cross-encoder scored, and a
cascade whose decisions on the evaluation pairs differ from its own cross-encoder's beyond its limit is
rejected with the figures in the reason.

Tiny random models on a toy home (real files, a real embedded MLflow store). Bands and thresholds are
set from the evaluation pairs themselves so each outcome is certain without training: a band of width
zero is the bi stage alone (about half its decisions differ from an unrelated cross-encoder's), a band
fitted on those pairs with `max_disagreement` 0.2 differs on at most a fifth of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pytest
from registry_helpers import one_torch_thread, tiny_model  # noqa: F401 - fixture
from test_cascade import write_tiny_cascade
from test_training_toydata import write_toy_home

from simpair.catalog import Catalog
from simpair.ensemble import compare_with_cross
from simpair.ensemble.cascade_band import fit_band
from simpair.metrics.binary_classification import binary_metrics
from simpair.models import ModelMetadata
from simpair.models.composite import CascadeSpec
from simpair.registry import registry
from simpair.registry.record import mark_challenger, register_trained_model
from simpair.runtime.loader import load_predictor
from simpair.selection.gate import CanaryResult, CascadeCheck, GatePolicy, decide
from simpair.selection.promotion import (
    cascade_checks,
    gate_exclusions,
    promote_manual,
    run_gate,
    wise_ft_record,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MSRP_TEST = [("msrp", "test")]
NAME = "simpair-paraphrase"
# no guardrail: a random tiny model's accuracy is a coin toss, and the point here is the cascade check
POLICY = GatePolicy(primary="f1", margin=0.005, guardrails={})


def _cascade(root: Path, home: Path, band: tuple[float, float], threshold: float, limit: float) -> Path:
    """A tiny cascade with the cross threshold and limit given, recorded as trained on msrp/train."""
    write_tiny_cascade(root, band)
    spec = CascadeSpec.read(root)
    spec.max_disagreement = limit
    spec.write(root)
    cross = ModelMetadata.read(root / spec.members[1])
    cross.threshold = threshold  # one threshold for every row: the cross-encoder's, as fit_cascade writes
    cross.write(root / spec.members[1])
    meta = ModelMetadata.read(root)
    meta.threshold = threshold
    meta.dataset_versions = {"msrp": Catalog(home).current_version("msrp")}
    meta.train_datasets = ["msrp/train"]
    meta.write(root)
    return root


def _register(home: Path, model_dir: Path) -> str:
    registered = register_trained_model(home, model_dir, {"name": model_dir.name}, {"dev": {"x": 1.0}})
    mark_challenger(home, registered)
    return registered.version


def _gate_report(home: Path, version: str) -> str:
    run_id = registry.client(home).get_model_version(NAME, version).tags["gate.run_id"]
    path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="gate_report.md")
    return Path(path).read_text()


@pytest.mark.slow  # three registered versions and two gate runs: about 20 s of CPU
def test_the_gate_judges_a_cascade_whole_shows_its_share_and_rejects_a_band_too_narrow(
    home: Path, tmp_path: Path
) -> None:
    write_toy_home(home, n_eval=120)
    excluded = gate_exclusions(home, MSRP_TEST, ["msrp/train"])
    test = Catalog(home).read_split("msrp", "test")
    test = test.filter(~test["pair_id"].is_in(list(excluded["msrp/test"])))
    a, b, gold = test["text_a"].to_list(), test["text_b"].to_list(), test["label"].to_numpy()
    probe = load_predictor(write_tiny_cascade(tmp_path / "probe", (0.5, 0.5)))
    p_bi, p_cross = probe.bi_probability(a, b), probe.members[1].predict(a, b)["probability"]
    threshold = float(np.median(p_cross))  # half the pairs on each side of the cross-encoder's threshold
    fitted = fit_band(p_bi, p_cross >= threshold, threshold, max_disagreement=0.2)
    assert 0.0 < fitted.share_to_cross < 1.0 and fitted.disagreement <= 0.2

    # 1. no champion: a band of width zero (the bi stage alone) meets the zero-shot bar and fails its limit
    narrow = _cascade(tmp_path / "narrow", home, (threshold, threshold), threshold, limit=0.005)
    v1 = _register(home, narrow)
    # a cascade.json without its band rule was fitted before the rule was recorded: the point rule
    assert registry.client(home).get_model_version(NAME, v1).tags["cascade.band_rule"] == "point"
    first = run_gate(home, "paraphrase", POLICY, MSRP_TEST)
    expected = compare_with_cross(load_predictor(narrow), a, b)
    assert expected.share_to_cross == 0.0 and expected.disagreement > 0.1
    [check] = first.cascade
    assert (check.pairs, check.limit) == (len(a), 0.005) and not check.passed
    assert check.disagreement == pytest.approx(expected.disagreement)
    assert not first.promote
    assert first.reason.startswith(
        f"cascade msrp/test: {expected.disagreement:.2%} of decisions "
        f"({round(expected.disagreement * len(a))} of {len(a)} pairs) differ from its own cross-encoder, "
        "above the limit 0.50%; 0.0% of pairs sent to the cross-encoder. In-domain: no champion yet; "
    )
    assert "untrained backbone zero-shot" in first.reason and first.zero_shot is not None
    # the challenger's figures are the cascade's own outputs, on the gate's common pairs
    whole = load_predictor(narrow).predict(a, b)
    f1 = binary_metrics(whole["probability"], gold, threshold)["f1"]
    assert first.challenger["msrp/test/f1"] == pytest.approx(f1)
    tags = registry.client(home).get_model_version(NAME, v1).tags
    assert tags["gate.decision"] == "rejected" and tags["gate.reason"] == first.reason
    assert float(tags["gate.cascade.msrp/test.disagreement"]) == pytest.approx(expected.disagreement)
    assert "| msrp/test | " in _gate_report(home, v1) and "| FAIL |" in _gate_report(home, v1)
    assert registry.version_for(registry.client(home), NAME, "champion") is None

    # 2. a champion that never says "paraphrase" (F1 0), put there by an operator
    never = tiny_model(tmp_path / "never", home)
    meta = ModelMetadata.read(never)
    meta.threshold = 1.01
    meta.write(never)
    v2 = _register(home, never)
    promote_manual(home, NAME, v2, reason="bootstrap")

    # 3. a band fitted to its limit (0.2) on these pairs: beats the champion, within its limit, promoted
    v3 = _register(home, _cascade(tmp_path / "fitted", home, (fitted.low, fitted.high), threshold, 0.2))
    third = run_gate(home, "paraphrase", POLICY, MSRP_TEST)
    assert third.promote, third.reason
    [check] = third.cascade
    assert check.passed and check.limit == 0.2
    assert check.share_to_cross == pytest.approx(fitted.share_to_cross)
    assert check.disagreement == pytest.approx(fitted.disagreement)
    assert third.reason.startswith(f"f1 {third.challenger['msrp/test/f1']:.4f} beats champion v{v2}")
    assert f"Cascade within its limit: cascade msrp/test: {fitted.disagreement:.2%}" in third.reason
    assert third.champion is not None and third.champion["msrp/test/f1"] == 0.0
    report = _gate_report(home, v3)
    assert "sent to the cross-encoder" in report
    assert f"| msrp/test | {len(a)} | {fitted.share_to_cross:.1%} | {fitted.disagreement:.2%}" in report
    c = registry.client(home)
    assert float(c.get_model_version(NAME, v3).tags["gate.cascade.msrp/test.share_to_cross"]) == (
        pytest.approx(fitted.share_to_cross)
    )
    assert "sent to the cross-encoder" in c.get_model_version(NAME, v3).description
    run = c.get_run(c.get_model_version(NAME, v3).tags["gate.run_id"])
    assert run.data.metrics["cascade/msrp/test/share_to_cross"] == pytest.approx(fitted.share_to_cross)
    assert run.data.metrics["cascade/msrp/test/passed"] == 1.0
    decision_json = json.loads(
        Path(
            mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="gate_decision.json")
        ).read_text()
    )
    assert decision_json["cascade"][0]["share_to_cross"] == pytest.approx(fitted.share_to_cross)
    assert registry.version_for(c, NAME, "champion") == v3

    # the policy's limit replaces the cascade's own; any other kind of model gets no cascade check
    assert cascade_checks(narrow, home, MSRP_TEST, excluded, limit=0.9)[0].passed
    assert cascade_checks(never, home, MSRP_TEST, excluded) == []


def test_decide_rejects_a_cascade_over_its_limit_and_keeps_the_in_domain_verdict() -> None:
    within = CascadeCheck("msrp/test", 1000, 0.25, 0.005, 0.005)  # exactly at the limit passes
    over = CascadeCheck("msrp/test", 1000, 0.12, 0.011, 0.005)
    ok = decide(POLICY, "4", {"f1": 0.9}, "3", {"f1": 0.8}, cascade=[within])
    assert ok.promote and ok.reason.endswith(
        "Cascade within its limit: cascade msrp/test: 0.50% of decisions (5 of 1000 pairs) differ from its "
        "own cross-encoder (limit 0.50%); 25.0% of pairs sent to the cross-encoder"
    )
    bad = decide(POLICY, "4", {"f1": 0.9}, "3", {"f1": 0.8}, cascade=[over])
    assert not bad.promote
    assert bad.reason == (
        "cascade msrp/test: 1.10% of decisions (11 of 1000 pairs) differ from its own cross-encoder, above "
        "the limit 0.50%; 12.0% of pairs sent to the cross-encoder. In-domain: f1 0.9000 beats champion v3 "
        "0.8000 by +0.1000 (margin 0.0050); guardrails none within tolerance"
    )
    assert bad.tags()["gate.cascade.msrp/test.disagreement"] == "0.011"
    assert "| msrp/test | 1000 | 12.0% | 1.10% (11) | 0.50% | FAIL |" in bad.to_markdown(NAME)
    # a failed canary and a failed cascade check are both named before the in-domain verdict
    canary = CanaryResult("stsb/test", "spearman", 0.5, 0.8, 0.02)
    both = decide(POLICY, "4", {"f1": 0.9}, "3", {"f1": 0.8}, canaries=[canary], cascade=[over])
    assert both.reason.startswith("canary stsb/test: spearman 0.5000")
    assert "; cascade msrp/test: 1.10%" in both.reason
    assert not both.promote


def test_a_cascades_wise_ft_path_is_its_cross_encoders(tmp_path: Path) -> None:
    """The band is fitted on the cross-encoder as chosen on its WiSE-FT path: the gate shows that path."""
    cascade = write_tiny_cascade(tmp_path / "cascade", (0.4, 0.6))
    assert wise_ft_record(cascade) is None  # neither the cascade nor its cross-encoder has one
    record = {"alpha": 0.8, "by_alpha": {"0.8": {"dev": 0.9}}, "rule": "largest alpha", "reason": "r"}
    cross = cascade / CascadeSpec.read(cascade).members[1]
    (cross / "metrics.json").write_text(json.dumps({"dev": {"f1": 0.9}, "wise_ft": record}))
    assert wise_ft_record(cascade) == record
