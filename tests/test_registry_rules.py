"""Pure rules of the registry stage: gate decisions, champion history, fault classes, profiles, lock.

No MLflow store and no Prefect here: these run in well under a second each.
"""

from __future__ import annotations

import errno
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from simpair.evaluation import best_threshold
from simpair.nightly.lock import NightlyBusy, nightly_lock
from simpair.nightly.plan import NightState, read_state, skip_reason, write_state
from simpair.nightly.profile import load_profile
from simpair.registry import history as hist
from simpair.registry.faults import is_transient
from simpair.registry.tracking import TrackingUnavailable, config_hash, flatten, flatten_metrics
from simpair.selection.gate import Canary, CanaryResult, GatePolicy, decide, metric

POLICY = GatePolicy(primary="f1", margin=0.01, guardrails={"accuracy": 0.02})


def test_gate_promotes_when_primary_improves_by_margin_and_guardrails_hold() -> None:
    d = decide(POLICY, "2", {"f1": 0.85, "accuracy": 0.80}, "1", {"f1": 0.83, "accuracy": 0.81})
    assert d.promote, d.reason
    assert "beats champion v1" in d.reason


def test_gate_rejects_gain_below_margin() -> None:
    d = decide(POLICY, "2", {"f1": 0.835, "accuracy": 0.9}, "1", {"f1": 0.83, "accuracy": 0.8})
    assert not d.promote
    assert "below the margin" in d.reason


def test_gate_rejects_guardrail_drop_beyond_tolerance() -> None:
    d = decide(POLICY, "2", {"f1": 0.90, "accuracy": 0.70}, "1", {"f1": 0.83, "accuracy": 0.80})
    assert not d.promote
    assert "guardrail accuracy dropped" in d.reason


def test_first_version_must_beat_zero_shot() -> None:
    won = decide(POLICY, "1", {"f1": 0.80, "accuracy": 0.7}, zero_shot={"f1": 0.75, "accuracy": 0.6})
    lost = decide(POLICY, "1", {"f1": 0.70, "accuracy": 0.7}, zero_shot={"f1": 0.75, "accuracy": 0.6})
    assert won.promote and "zero-shot" in won.reason
    assert not lost.promote and "does not beat" in lost.reason


def test_corrupt_champion_falls_back_to_zero_shot_bar() -> None:
    d = decide(
        POLICY, "3", {"f1": 0.8}, "2", None, zero_shot={"f1": 0.7}, champion_error="CorruptModel: gone"
    )
    assert d.promote
    assert "champion v2 is unusable" in d.reason
    assert d.tags()["gate.champion_error"].startswith("CorruptModel")


def test_nan_challenger_is_never_promoted_and_nan_reference_is_beatable() -> None:
    assert not decide(POLICY, "2", {"f1": math.nan}, zero_shot={"f1": 0.1}).promote
    assert decide(
        GatePolicy(primary="spearman"), "1", {"spearman": 0.2}, zero_shot={"spearman": math.nan}
    ).promote


def test_decision_tags_and_markdown_carry_both_metric_sets() -> None:
    d = decide(POLICY, "2", {"f1": 0.85, "accuracy": 0.8}, "1", {"f1": 0.83, "accuracy": 0.81})
    tags = d.tags()
    assert tags["gate.challenger.f1"] == "0.85" and tags["gate.champion.f1"] == "0.83"
    md = d.to_markdown("simpair-paraphrase")
    assert "| f1 (primary) | 0.8500 | 0.8300 | +0.0200 |" in md


def _canary(challenger: float, zero_shot: float, margin: float = 0.02) -> CanaryResult:
    return CanaryResult("msrp/test", "roc_auc", challenger, zero_shot, margin)


def test_failed_canary_rejects_despite_an_in_domain_gain_champion_or_not() -> None:
    fell = _canary(0.612, 0.705)
    with_champion = decide(
        POLICY, "2", {"f1": 0.90, "accuracy": 0.85}, "1", {"f1": 0.80, "accuracy": 0.80}, canaries=[fell]
    )
    first = decide(POLICY, "1", {"f1": 0.90, "accuracy": 0.85}, zero_shot={"f1": 0.5}, canaries=[fell])
    for d in (with_champion, first):
        assert not d.promote
        assert d.reason.startswith(
            "canary msrp/test: roc_auc 0.6120 is 0.0930 below the untrained backbone's 0.7050 (margin 0.0200)"
        )
        assert "In-domain: " in d.reason  # the in-domain verdict stays on record
    assert "beats champion v1" in with_champion.reason
    tags = with_champion.tags()
    assert tags["gate.canary.msrp/test.roc_auc.challenger"] == "0.612"
    assert tags["gate.canary.msrp/test.roc_auc.zero_shot"] == "0.705"
    md = with_champion.to_markdown("simpair-sts")
    assert "| msrp/test | roc_auc | 0.6120 | 0.7050 | -0.0930 | 0.0200 | FAIL |" in md


def test_passing_canaries_let_an_in_domain_gain_promote_and_say_so() -> None:
    d = decide(
        POLICY,
        "2",
        {"f1": 0.90, "accuracy": 0.85},
        "1",
        {"f1": 0.80, "accuracy": 0.80},
        canaries=[_canary(0.70, 0.705), CanaryResult("stsb/test", "spearman", 0.8, 0.7, 0.02)],
    )
    assert d.promote, d.reason
    assert "beats champion v1" in d.reason and "Canaries passed: canary msrp/test" in d.reason
    assert "| stsb/test | spearman | 0.8000 | 0.7000 | +0.1000 | 0.0200 | pass |" in d.to_markdown("m")
    # a passing canary never rescues an in-domain rejection
    lost = decide(POLICY, "2", {"f1": 0.80, "accuracy": 0.8}, "1", {"f1": 0.80}, canaries=[_canary(0.9, 0.7)])
    assert not lost.promote and "below the margin" in lost.reason and "Canaries passed" in lost.reason


def test_canary_margin_boundary_and_undefined_figures() -> None:
    assert _canary(0.68, 0.70).passed  # exactly the margin below: allowed (float noise tolerated)
    assert _canary(0.70 - 0.02, 0.70).passed
    assert not _canary(0.6799, 0.70).passed
    assert _canary(0.65, 0.70, margin=0.05).passed and not _canary(0.65, 0.70, margin=0.0).passed
    assert not _canary(math.nan, 0.70).passed and _canary(0.1, math.nan).passed
    boundary = decide(
        POLICY,
        "2",
        {"f1": 0.9, "accuracy": 0.9},
        "1",
        {"f1": 0.8, "accuracy": 0.9},
        canaries=[_canary(0.68, 0.70)],
    )
    assert boundary.promote, boundary.reason


def test_canary_metric_defaults_follow_the_split_kind_and_the_task() -> None:
    msrp, stsb = Canary(dataset="msrp", split="test"), Canary(dataset="stsb", split="test")
    assert msrp.resolve_metric("sts", "spearman", binary=True) == "roc_auc"
    assert stsb.resolve_metric("paraphrase", "f1", binary=False) == "spearman"
    assert msrp.resolve_metric("paraphrase", "f1", binary=True) == "f1"  # same kind: the task primary
    assert stsb.resolve_metric("sts", "spearman", binary=False) == "spearman"
    assert (
        Canary(dataset="x", split="y", metric="pearson").resolve_metric("paraphrase", "f1", False)
        == "pearson"
    )
    with pytest.raises(ValueError, match="needs a decision threshold"):  # a graded model has none
        Canary(dataset="msrp", split="test", metric="f1").resolve_metric("sts", "spearman", binary=True)


def test_profile_gate_takes_canaries_and_refuses_unknown_keys(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(
        "name: x\ntasks: {sts: {config: configs/stsb-bi.yaml, evaluate: [[stsb, test]],\n"
        "  gate: {primary: spearman, canaries: [{dataset: msrp, split: test}]}}}\n"
    )
    policy = load_profile(profile).tasks["sts"].gate
    assert policy.canaries == [Canary(dataset="msrp", split="test", metric=None, margin=0.02)]
    assert GatePolicy.default("sts").canaries == []  # a profile without canaries gets none
    default = load_profile("default").tasks  # the shipped profile guards both models off their domain
    assert default["sts"].gate.canaries == [Canary(dataset="msrp", split="test", metric=None, margin=0.02)]
    assert default["paraphrase"].gate.canaries == [
        Canary(dataset="stsb", split="test", metric=None, margin=0.02)
    ]
    # the paraphrase model keeps the backbone's ranking by stacking with its cosine (no WiSE-FT walk);
    # the STS model chooses its WiSE-FT alpha on canaries that are never test splits
    assert (
        default["paraphrase"].config.name == "msrp-cross-backbone.yaml"
        and default["paraphrase"].wise_ft is None
    )
    # (MSRP train pairs, and the STS-B dev pairs of groups its train split lacks)
    sts_canaries = default["sts"].wise_ft.canaries
    assert [(c.dataset, c.split, c.unseen_groups is not None) for c in sts_canaries] == [
        ("msrp", "train", False),
        ("stsb", "dev", True),
    ]
    profile.write_text(profile.read_text().replace("split: test}", "split: test, margn: 0.1}"))
    with pytest.raises(ValueError, match=r"(?s)p\.yaml: invalid nightly profile.*margn"):
        load_profile(profile)


def test_metric_lookup_by_suffix_averages_over_splits() -> None:
    flat = flatten_metrics({"msrp/test": {"f1": 0.5, "n": 10}, "note": "x"})
    assert flat == {"msrp/test/f1": 0.5, "msrp/test/n": 10.0}
    assert metric(flat, "f1") == 0.5
    assert metric({"a/test/f1": 1.0, "b/test/f1": 2.0}, "f1") == 1.5
    with pytest.raises(KeyError, match="not among"):
        metric(flat, "spearman")


def test_history_promote_and_rollback_replay_as_a_stack() -> None:
    entries = [hist.HistoryEntry(action="promote", version=v) for v in ("1", "2", "3")]
    assert hist.rollback_target(entries, "3") == "2"
    entries.append(hist.HistoryEntry(action="rollback", version="2"))
    assert hist.champion_stack(entries) == ["1", "2"]
    assert hist.rollback_target(entries, "2") == "1"  # a second rollback goes further back, no ping-pong
    entries.append(hist.HistoryEntry(action="rollback", version="1"))
    with pytest.raises(ValueError, match="no previous champion"):
        hist.rollback_target(entries, "1")
    assert hist.parse(hist.dump(entries)) == entries


def test_history_tag_stays_under_the_tag_size_limit() -> None:
    entries = [hist.HistoryEntry(action="promote", version=str(i), reason="x" * 500) for i in range(100)]
    assert len(hist.dump(entries)) < 5000


def test_fault_classes() -> None:
    assert is_transient(TrackingUnavailable("down"))
    assert is_transient(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert is_transient(RuntimeError("API request failed: Max retries exceeded with url"))
    wrapped = RuntimeError("register failed")
    wrapped.__cause__ = OSError(errno.EIO, "I/O error")
    assert is_transient(wrapped)
    assert not is_transient(OSError("/nope is not a local folder and is not a valid model identifier"))
    assert not is_transient(ValueError("bad config"))
    assert not is_transient(FileNotFoundError(errno.ENOENT, "missing"))


def test_f1_threshold_of_the_zero_shot_bar_separates_a_separable_sample() -> None:
    scores = np.array([0.9, 0.8, 0.3, 0.2], dtype=np.float32)
    labels = np.array([1, 1, 0, 0])
    t = best_threshold(scores, labels, "f1")
    assert 0.3 < t < 0.8


def test_config_hash_ignores_key_order_and_flatten_nests() -> None:
    assert config_hash({"a": 1, "b": {"c": 2}}) == config_hash({"b": {"c": 2}, "a": 1})
    assert flatten({"a": {"b": [1, 2]}, "c": None}) == {"a.b": "[1, 2]", "c": "None"}


def test_profiles_load_and_name_their_files() -> None:
    default = load_profile("default")
    smoke = load_profile("smoke")
    assert set(default.tasks) == {"paraphrase", "sts"} and default.tasks["sts"].gate.primary == "spearman"
    assert smoke.name == "smoke"
    for plan in (*default.tasks.values(), *smoke.tasks.values()):
        assert plan.config_path().is_file(), plan.config


def test_bad_profile_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("name: x\ntasks: {nope: {config: a.yaml, evaluate: [], gate: {primary: f1}}}\n")
    with pytest.raises(ValueError, match=r"(?s)p\.yaml: invalid nightly profile.*unknown task"):
        load_profile(bad)


def test_jobs_on_a_single_training_config_is_refused_naming_the_task(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(
        "name: x\ntasks: {sts: {config: configs/stsb-bi.yaml, jobs: 2, evaluate: [[stsb, test]],"
        " gate: {primary: spearman}}}\n"
    )
    with pytest.raises(ValueError, match=r"(?s)p\.yaml.*tasks\.sts\.jobs is 2, but configs/stsb-bi\.yaml"):
        load_profile(profile)
    profile.write_text(profile.read_text().replace("stsb-bi.yaml", "stsb-stack.yaml"))
    assert load_profile(profile).tasks["sts"].jobs == 2


def test_skip_rule_uses_the_last_successful_night(tmp_path: Path) -> None:
    versions, hashes = {"msrp": "v1", "stsb": "w1"}, {"paraphrase": "h1"}
    assert skip_reason(read_state(tmp_path, "smoke"), versions, hashes) is None
    write_state(tmp_path, NightState(profile="smoke", dataset_versions=versions, config_hashes=hashes))
    reason = skip_reason(read_state(tmp_path, "smoke"), versions, hashes)
    assert reason and "no source or training config changed" in reason
    assert skip_reason(read_state(tmp_path, "smoke"), {**versions, "msrp": "v2"}, hashes) is None
    assert skip_reason(read_state(tmp_path, "smoke"), versions, {"paraphrase": "h2"}) is None
    assert read_state(tmp_path, "default") is None


def test_second_nightly_exits_with_a_message_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from simpair.nightly.lock import nightly_lock\n"
            "with nightly_lock(Path(sys.argv[1])):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(30)\n",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with (
            pytest.raises(NightlyBusy, match=r"another nightly run is in progress .*held by pid"),
            nightly_lock(tmp_path, wait_seconds=1.0),
        ):
            pass
        assert time.monotonic() - started >= 0.9  # it waited the configured time first
    finally:
        holder.kill()
        holder.wait()
    with nightly_lock(tmp_path, wait_seconds=5.0):  # released when the holder died
        pass
