"""The saved-model format and the predictor, on a tiny random BERT with the real vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simpair.models import ModelMetadata, save_tiny_model
from simpair.models.metadata import Calibration
from simpair.runtime.loader import load_predictor

A = ["A cat sat on the mat.", "Stocks fell sharply on Monday.", "He said no.", "A cat sat on the mat."]
B = ["The cat is sitting on a mat.", "Shares dropped on Monday.", "She said yes, loudly and at length.", "x"]


@pytest.mark.parametrize("kind", ["cross", "bi"])
@pytest.mark.parametrize("task", ["paraphrase", "sts"])
def test_tiny_model_round_trip_format_and_outputs(tmp_path: Path, kind: str, task: str) -> None:
    model_dir = save_tiny_model(tmp_path / "m", task=task, kind=kind, seed=1)
    files = {p.name for p in model_dir.iterdir()}
    assert {"model.safetensors", "config.json", "simpair.json", "tokenizer.json"} <= files
    assert not any(name.endswith((".bin", ".pkl", ".pt")) for name in files), "never pickle"
    pred = load_predictor(model_dir)
    assert (pred.task, pred.kind) == (task, kind)
    assert pred.metadata["max_length"] == 128 and pred.metadata["threshold"] == 0.5
    out = pred.predict(A, B, batch_size=2)
    assert out["score"].dtype == np.float32 and out["score"].shape == (4,)
    assert np.all((out["score"] >= 0) & (out["score"] <= 1))
    if task == "paraphrase":
        assert out["probability"].dtype == np.float32 and out["label"].dtype == np.int8
        np.testing.assert_array_equal(out["label"], (out["probability"] >= 0.5).astype(np.int8))
    else:
        assert set(out) == {"score"}
    # Reloading the same directory gives identical predictions.
    again = load_predictor(model_dir).predict(A, B, batch_size=3)
    np.testing.assert_allclose(again["score"], out["score"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["cross", "bi"])
def test_predict_restores_input_order_and_is_batch_invariant(tmp_path: Path, kind: str) -> None:
    pred = load_predictor(save_tiny_model(tmp_path / "m", kind=kind, seed=3))
    raw = pred.predict_raw(A, B, batch_size=1)
    perm = np.array([2, 0, 3, 1])
    shuffled = pred.predict_raw([A[i] for i in perm], [B[i] for i in perm], batch_size=64)
    np.testing.assert_allclose(shuffled, raw[perm], atol=1e-5)
    assert pred.predict_raw([], []).shape == (0,)
    with pytest.raises(ValueError, match="text_a has 1"):
        pred.predict(["a"], ["b", "c"])


def test_bi_encoder_embeddings_and_symmetry(tmp_path: Path) -> None:
    pred = load_predictor(save_tiny_model(tmp_path / "m", kind="bi"))
    emb = pred.embed(["one", "two", "one"])
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(emb[0], emb[2], atol=1e-6)
    np.testing.assert_allclose(pred.predict_raw(A, B), pred.predict_raw(B, A), atol=1e-6)


def test_truncated_flags_long_pairs(tmp_path: Path) -> None:
    pred = load_predictor(save_tiny_model(tmp_path / "m"))
    long = "word " * 300
    flags = pred.truncated([long, "short", "short"], ["short", long, "also short"])
    assert flags.tolist() == [True, True, False]
    assert pred.truncated([], []).shape == (0,)


def test_metadata_calibration_threshold_and_symmetric_flags_are_honoured(tmp_path: Path) -> None:
    model_dir = save_tiny_model(tmp_path / "m", kind="bi")
    meta = ModelMetadata.read(model_dir)
    meta.calibration = Calibration(a=10.0, b=-5.0)
    meta.threshold = 0.9
    meta.write(model_dir)
    pred = load_predictor(model_dir)
    raw = pred.predict_raw(A, B)
    out = pred.predict(A, B)
    np.testing.assert_allclose(out["probability"], 1 / (1 + np.exp(-(10 * raw - 5))), atol=1e-5)
    np.testing.assert_array_equal(out["label"], (out["probability"] >= 0.9).astype(np.int8))

    cross_dir = save_tiny_model(tmp_path / "c", kind="cross", seed=5)
    one_way = load_predictor(cross_dir)
    meta = ModelMetadata.read(cross_dir)
    meta.symmetric = True
    meta.write(cross_dir)
    both = load_predictor(cross_dir)
    expected = (one_way.predict_raw(A, B) + one_way.predict_raw(B, A)) / 2
    np.testing.assert_allclose(both.predict_raw(A, B), expected, atol=1e-6)


def test_missing_or_invalid_metadata_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="simpair.json"):
        load_predictor(tmp_path)
    model_dir = save_tiny_model(tmp_path / "m")
    (model_dir / "simpair.json").write_text(json.dumps({"kind": "tri", "task": "sts"}))
    with pytest.raises(ValueError, match="simpair.json"):
        load_predictor(model_dir)


def test_default_backbone_loads_as_both_kinds() -> None:
    from simpair.models import build_model, default_backbone

    for kind in ("cross", "bi"):
        model = build_model(kind, default_backbone())
        assert model.kind == kind


def test_a_cross_encoder_from_a_sentence_encoder_logs_its_fresh_head_in_one_plain_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """transformers' colour-coded, multi-line load report for the missing head stays out of the logs."""
    import logging

    from transformers import AutoModel

    from simpair.models import build_model
    from simpair.models.tiny import tiny_config

    AutoModel.from_config(tiny_config(64)).save_pretrained(tmp_path)  # a body without a classifier
    capfd.readouterr()
    with caplog.at_level(logging.INFO, logger="simpair.models.cross_encoder"):
        model = build_model("cross", tmp_path)
    out, err = capfd.readouterr()
    assert model.kind == "cross"
    assert "LOAD REPORT" not in out + err and "\x1b[" not in out + err
    (line,) = [r.getMessage() for r in caplog.records if "classification head" in r.getMessage()]
    assert "classifier.weight" in line and "\n" not in line
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
