"""A fast rung with fp32 near the threshold: decisions kept, the band fitted by the ladder, loaded by runs.

Real tiny cross-encoders (int8 on ONNX Runtime is the fast runtime: it runs on any CPU), a toy dataset
ingested into the test's home, the real ladder and a real scoring run. The knife-edge model's
threshold is its median fp32 dev probability, so int8 flips many of its labels by itself.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from test_precision_ladder import _knife_edge
from test_scoring_int8 import _ingest_toy
from test_scoring_support import make_pairs, read_outputs, write_batch, write_tiny_stack

from simpair.models import device as devices
from simpair.models.precision_verdict import PrecisionVerdict, RungCheck
from simpair.runtime import recheck
from simpair.runtime.loader import load_for_run, load_predictor
from simpair.runtime.model_ref import resolve_model_ref
from simpair.runtime.options import ForwardPin, RuntimeOptions
from simpair.runtime.resolve import resolve_run
from simpair.scoring import score_inbox
from simpair.selection import precision_ladder as ladder


@pytest.fixture
def edge(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(devices, "native_bf16", lambda device: False)  # int8 only, on any CPU
    return _knife_edge(tmp_path / "edge", _ingest_toy(home, tmp_path), home)


def _texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    table = make_pairs(n, seed=seed)
    return table.column("text_a").to_pylist(), table.column("text_b").to_pylist()


def test_pairs_inside_the_band_take_fp32_logits_and_the_rest_keep_the_fast_ones(
    edge: Path, one_thread: None
) -> None:
    a, b = _texts(600, seed=41)  # enough near the knife edge for either int8 recipe to flip some
    exact = load_predictor(str(edge), precision="fp32", backend="auto", threads=1)
    fast = load_predictor(str(edge), precision="int8", backend="auto", threads=1, recheck=False)
    want, quick = exact.predict_raw(a, b), fast.predict_raw(a, b)
    assert (
        (want >= recheck.threshold_logit(exact.threshold))
        != (quick >= recheck.threshold_logit(exact.threshold))
    ).any()

    band = recheck.fit_band(want, quick, recheck.raw_cut(exact))
    assert band.width == pytest.approx(
        recheck.FACTOR * np.quantile(np.abs(quick - want), recheck.QUANTILE), rel=1e-5
    )
    for width in (band.width / recheck.FACTOR / 2, band.width):
        rechecked = recheck.ThresholdRecheck(fast, exact, width)
        got = rechecked.predict_raw(a, b)
        near = np.abs(quick - rechecked.cut) < width
        assert 0 < near.sum() == rechecked.rechecked
        np.testing.assert_allclose(got[near], want[near], atol=1e-5)  # fp32 where the band holds them
        np.testing.assert_array_equal(got[~near], quick[~near])  # the fast logits elsewhere
    # a band wider than the fast runtime's error: every decision is fp32's
    np.testing.assert_array_equal(rechecked.predict(a, b)["label"], exact.predict(a, b)["label"])
    assert rechecked.precision == "int8" and rechecked.variant.endswith("+fp32-recheck")


def test_the_ladder_rechecks_a_refused_rung_and_every_run_loads_it_so(
    edge: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    plain = ladder.measure(edge, home, threads=1)  # the default cap: int8's band would hold most of dev
    assert plain.rung("int8").verdict == "refused" and plain.rung("int8").recheck_band is None

    verdict = ladder.measure(edge, home, threads=1, recheck_max_share=1.0)
    int8 = verdict.rung("int8")
    assert int8.verdict == "accepted" and int8.label_flip_share == 0.0 and int8.metric_delta == 0.0
    assert int8.recheck_band > 0 and 0 < int8.recheck_share <= 1.0 and int8.label() == "int8 + fp32 recheck"
    assert "fp32 recheck within" in int8.figures()
    tags = verdict.to_tags()
    assert float(tags["simpair.precision.int8.recheck_band"]) == pytest.approx(int8.recheck_band, rel=1e-5)
    verdict.write(edge)
    assert PrecisionVerdict.read(edge).rung("int8").recheck_band == int8.recheck_band

    loaded = load_predictor(str(edge), precision="int8", backend="auto", threads=1)
    assert isinstance(loaded, recheck.ThresholdRecheck) and loaded.band == int8.recheck_band
    # a run's stages get the very model `load_predictor` loaded, not a second copy
    assert load_for_run(str(edge), RuntimeOptions(threads=1, backend="auto"), "int8") is loaded
    assert not isinstance(
        load_predictor(str(edge), precision="int8", backend="auto", threads=1, recheck=False),
        recheck.ThresholdRecheck,
    )
    assert not isinstance(
        load_predictor(str(edge), precision="fp32", backend="auto", threads=1), recheck.ThresholdRecheck
    )

    # the fp32 side, built on demand, is the very fp32 copy a plain fp32 load gets
    assert loaded.exact is load_predictor(str(edge), precision="fp32", backend="auto", threads=1)

    # a run reads its precision and what that loads with from one verdict; its stages share the copy
    ref = resolve_model_ref(str(edge), home)
    chosen, _, pin = resolve_run("int8", "auto", ref, home)
    assert chosen == "int8" and pin.recheck_band == int8.recheck_band and pin.bf16_via is None
    run = RuntimeOptions(threads=1, backend="auto", pin=pin)
    assert load_for_run(str(edge), run, "int8") is loaded
    with pytest.raises(ValueError, match="pinned to int8"):
        load_for_run(str(edge), run, "fp32")

    # measured again while this process lives: its next load takes the new band, not the cached one,
    # while the stages of the run that started before keep the band it began with
    verdict = PrecisionVerdict.read(edge)
    wider = dataclasses.replace(int8, recheck_band=int8.recheck_band * 2)
    dataclasses.replace(
        verdict, rungs=tuple(wider if r.precision == "int8" else r for r in verdict.rungs)
    ).write(edge)
    reloaded = load_predictor(str(edge), precision="int8", backend="auto", threads=1)
    assert isinstance(reloaded, recheck.ThresholdRecheck) and reloaded.band == wider.recheck_band
    assert load_for_run(str(edge), run, "int8") is loaded and loaded.band == int8.recheck_band
    later = RuntimeOptions(threads=1, backend="auto", pin=resolve_run("int8", "auto", ref, home)[2])
    assert load_for_run(str(edge), later, "int8") is reloaded
    verdict.write(edge)  # as measured, for the rest of this test

    # an explicit int8 still passes its own guard on plain int8 first (loose limits here), then loads
    # with the verdict's band
    monkeypatch.setenv("SIMPAIR_INT8_MAX_FLIP_SHARE", "1")
    monkeypatch.setenv("SIMPAIR_INT8_MAX_DELTA", "1")
    inbox = tmp_path / "inbox"
    write_batch(make_pairs(60, seed=42), inbox / "night1.parquet")
    summary = score_inbox(str(inbox), tmp_path / "out", str(edge), home, threads=1, precision="int8")
    assert summary.precision == "int8"
    output = read_outputs(tmp_path / "out")
    texts = output.column("text_a").to_pylist(), output.column("text_b").to_pylist()
    np.testing.assert_allclose(output.column("score").to_numpy(), loaded.predict(*texts)["score"], atol=1e-6)


def test_a_worker_that_cannot_run_the_pinned_bf16_runtime_refuses(
    edge: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run pinned to bf16 on OpenVINO by its driver: a worker on `--backend torch` (or without the
    package) has only torch autocast, whose scores differ, so it refuses rather than mix runtimes."""
    monkeypatch.setattr(devices, "native_bf16", lambda device: True)  # bf16 itself is runnable here
    run = RuntimeOptions(threads=1, backend="torch", pin=ForwardPin(precision="bf16", bf16_via="openvino"))
    with pytest.raises(RuntimeError, match="pinned to bf16 on openvino, which this worker"):
        load_for_run(str(edge), run, "bf16")


@pytest.mark.parametrize("band", [0.0, 100.0])
def test_a_stack_scored_through_the_embedding_store_takes_its_band(
    band: float, home: Path, tmp_path: Path, one_thread: None
) -> None:
    """A stack's bi member reads its cosines from the embedding store (`member_raw`); the band still
    decides which pairs fp32 scores: none (band 0: int8's scores) or all (band 100: fp32's scores).
    The verdict is written here: what is tested is how runs apply one, not how the ladder fits it."""
    stack = write_tiny_stack(tmp_path / "stack")
    rungs = (
        RungCheck("fp32", "accepted", "the reference", speedup=1.0),
        RungCheck("bf16", "skipped", "not measured here"),
        RungCheck("int8", "accepted", "", speedup=2.0, recheck_band=band, recheck_share=0.5),
    )
    here = devices.host_facts(devices.pick_device("auto"))  # int8 holds on the graph it was judged on
    PrecisionVerdict(
        "f1", "toy/dev", 10, "cpu", 1, "2026-11-27T00:00:00+00:00", 0.002, 0.005, rungs, here
    ).write(stack)
    inbox = tmp_path / "inbox"
    write_batch(make_pairs(50, seed=43), inbox / "night1.parquet")
    summary = score_inbox(str(inbox), tmp_path / "out", str(stack), home, threads=1)
    assert summary.precision == "int8" and "fp32 recheck within" in summary.precision_why
    output = read_outputs(tmp_path / "out")
    texts = output.column("text_a").to_pylist(), output.column("text_b").to_pylist()
    fp32 = load_predictor(str(stack), precision="fp32", backend="auto", threads=1).predict(*texts)["score"]
    int8 = load_predictor(str(stack), precision="int8", backend="auto", threads=1, recheck=False).predict(
        *texts
    )["score"]
    # the run's own copy of the model (the cache entry its stages took) counts the pairs fp32 scored
    scorer = load_predictor(str(stack), precision="int8", backend="auto", threads=1)
    assert isinstance(scorer, recheck.ThresholdRecheck)
    assert scorer.rechecked == (0 if band == 0 else len(set(zip(*texts, strict=True))))
    # dynamic int8 takes activation ranges per batch, so its scores move ~1e-5 with the batching
    want, atol = (fp32, 1e-5) if band else (int8, 1e-4)
    np.testing.assert_allclose(output.column("score").to_numpy(), want, atol=atol)
    assert set(output.column("precision").to_pylist()) == {"int8"}


def test_the_ladder_judges_the_band_out_of_sample() -> None:
    """Each half of dev is decided with the band fitted on the other half: a flip the full band would
    hide (pair 1: off by 0.5 while the other half is off by at most 0.1) stays a flip."""
    exact = np.array([0.0, 0.1, 2.0, 0.5])
    fast = np.array([0.1, 0.6, 2.0, 0.5])
    assert recheck.fit_band(exact, fast, cut=0.2).width > 0.4  # would hold pair 1
    np.testing.assert_allclose(recheck.cross_fitted(exact, fast, cut=0.2), [0.0, 0.6, 2.0, 0.5])


def test_a_logistic_stack_is_rechecked_at_its_own_cut(tmp_path: Path, one_thread: None) -> None:
    """A stack's raw output is its combiner's logit: the band is measured around the threshold's logit."""
    from simpair.models.metadata import ModelMetadata

    stack = write_tiny_stack(tmp_path / "stack")
    a, b = _texts(200, seed=44)
    meta = ModelMetadata.read(stack)
    meta.threshold = float(np.median(load_predictor(stack, device="cpu").predict(a, b)["probability"]))
    meta.write(stack)
    exact = load_predictor(str(stack), precision="fp32", backend="auto", threads=1)
    fast = load_predictor(str(stack), precision="int8", backend="auto", threads=1, recheck=False)
    assert recheck.raw_cut(exact) == pytest.approx(recheck.threshold_logit(meta.threshold))
    want, quick = exact.predict_raw(a, b), fast.predict_raw(a, b)
    width = float(np.median(np.abs(quick - recheck.raw_cut(exact))))  # half of the pairs: the nearer half
    rechecked = recheck.ThresholdRecheck(fast, exact, width)
    got = rechecked.predict_raw(a, b)
    near = np.abs(quick - rechecked.cut) < width
    assert 0.3 * len(a) < near.sum() < 0.7 * len(a) and rechecked.rechecked == near.sum()
    np.testing.assert_allclose(got[near], want[near], atol=1e-5)
    np.testing.assert_array_equal(got[~near], quick[~near])


def test_one_pair_far_from_the_cut_does_not_widen_the_band() -> None:
    """The band follows what nearly every dev pair does: a saturated logit that moved by 3 (far from a
    cut at 0) leaves it at three times the others' change, where the largest change would make it 9."""
    rng = np.random.default_rng(5)
    exact = rng.uniform(-5, 5, 400)
    fast = exact + rng.uniform(-0.1, 0.1, 400)
    fast[0], exact[0] = 8.0, 5.0
    band = recheck.fit_band(exact, fast, cut=0.0)
    assert 0.25 < band.width <= recheck.FACTOR * 0.1
    assert band.share < 0.1


def test_the_band_holds_every_pair_the_rung_flipped_on_dev() -> None:
    """Three of 400 pairs crossing the cut: the 99th percentile of the changes is 0, yet the band
    reaches past each of them, so the recheck gives back fp32's decision on every one."""
    exact = np.linspace(-5, 5, 400)
    exact[[10, 200, 390]] = [-0.05, 0.1, 0.15]
    fast = exact.copy()
    fast[[10, 200, 390]] = [0.40, -0.3, -0.2]
    assert np.quantile(np.abs(fast - exact), recheck.QUANTILE) == 0
    band = recheck.fit_band(exact, fast, cut=0.0)
    assert band.width > 0.4
    near = np.abs(fast) < band.width
    assert near[[10, 200, 390]].all()
