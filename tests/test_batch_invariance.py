"""A pair's score does not depend on what it is batched with, at every precision the ladder can pick.

Every forward pass `--precision auto` may run (fp32 on torch and ONNX Runtime, bf16 on torch autocast
and OpenVINO, int8 on its per-row ONNX Runtime graph) scores the same pairs shuffled, at batch sizes
1, 8 and 64, and cut into small chunks against one large one; each pair's score must agree within
`MAX_BATCH_DIFF`. ONNX Runtime's dynamic int8 (one activation scale per batch tensor) does not, and
the precision ladder refuses it with that reason. Real tiny random models, real runtimes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_scoring_support as support
import torch
from test_scoring_int8 import _ingest_toy, _texts, _tiny_with_dev

from simpair.models import save_tiny_model
from simpair.models.device import native_bf16
from simpair.runtime import int8_backend
from simpair.runtime.bf16_backend import use_bf16
from simpair.runtime.int8_backend import use_int8
from simpair.runtime.loader import load_predictor
from simpair.runtime.onnx_backend import use_onnx
from simpair.runtime.openvino_backend import use_openvino
from simpair.selection import precision_ladder as ladder

tiny_bi = support.tiny_bi
PAIRS = 48
SMALL_CHUNK = 5
# a tiny random head's logits barely spread, so int8 noise moves its scores by ~5e-5 at most; scaled
# up, the head shows what a trained model's sharp logits do with the same noise
SHARPER = 50.0


def _torch(model: Path) -> Any:
    """A fresh copy of the model's torch forward pass (bf16 casts its Linear layers in place)."""
    return load_predictor(model, device="cpu", precision="fp32")


FORWARD_PASSES: dict[str, Callable[[Path], Any]] = {
    "fp32-torch": _torch,
    "fp32-onnx": lambda model: use_onnx(_torch(model), threads=1),
    "bf16-torch": lambda model: use_bf16(_torch(model)),
    "bf16-openvino": lambda model: use_openvino(_torch(model), threads=1),
    "int8": lambda model: use_int8(_torch(model), threads=1),
}


def _sharpened(model: Path) -> Path:
    """The tiny cross-encoder with its classifier's weights scaled by `SHARPER` (written in place)."""
    from safetensors.numpy import load_file, save_file

    weights = load_file(model / "model.safetensors")
    weights["classifier.weight"] = weights["classifier.weight"] * SHARPER
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    return model


@pytest.fixture(scope="module")
def tiny_cross(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny cross-encoder sharp enough that dynamic int8 moves its scores past `MAX_BATCH_DIFF`."""
    path = tmp_path_factory.mktemp("models") / "sharp-cross"
    return _sharpened(save_tiny_model(path, task="paraphrase", kind="cross"))


def _largest_move(predictor: Any, a: list[str], b: list[str]) -> dict[str, float]:
    """Each batching's largest score change against the pairs scored all at once at batch size 64."""
    want = predictor.predict(a, b, batch_size=64)["score"]
    moves = {}
    for size in (1, 8):
        moves[f"batch {size}"] = predictor.predict(a, b, batch_size=size)["score"]
    order = np.random.default_rng(3).permutation(len(a))
    shuffled = predictor.predict([a[i] for i in order], [b[i] for i in order], batch_size=8)["score"]
    moves["shuffled"] = np.empty_like(shuffled)
    moves["shuffled"][order] = shuffled
    chunks = [
        predictor.predict(a[i : i + SMALL_CHUNK], b[i : i + SMALL_CHUNK])["score"]
        for i in range(0, len(a), SMALL_CHUNK)
    ]
    moves["small chunks"] = np.concatenate(chunks)
    return {name: float(np.max(np.abs(got - want))) for name, got in moves.items()}


@pytest.mark.parametrize("kind", ["tiny_cross", "tiny_bi"])
@pytest.mark.parametrize("forward_pass", list(FORWARD_PASSES))
def test_every_forward_pass_scores_a_pair_the_same_in_any_batch(
    forward_pass: str, kind: str, request: pytest.FixtureRequest, one_thread: None
) -> None:
    if forward_pass == "bf16-torch" and not native_bf16(torch.device("cpu")):
        pytest.skip(
            "no native bf16 on this CPU: the torch bf16 pass is refused here (emulated, slower than fp32)"
        )
    predictor = FORWARD_PASSES[forward_pass](request.getfixturevalue(kind))
    a, b = _texts(PAIRS, seed=21)
    moves = _largest_move(predictor, a, b)
    assert max(moves.values()) <= ladder.MAX_BATCH_DIFF, moves


def test_dynamic_int8_moves_with_its_batch_mates_per_row_does_not(tiny_cross: Path, one_thread: None) -> None:
    """Why int8 quantizes each row on its own: one scale per batch tensor moves a pair's score."""
    a, b = _texts(PAIRS, seed=21)
    dynamic = _largest_move(use_int8(_torch(tiny_cross), threads=1, mode="dynamic"), a, b)
    per_row = _largest_move(use_int8(_torch(tiny_cross), threads=1), a, b)
    assert max(dynamic.values()) > ladder.MAX_BATCH_DIFF, dynamic
    assert max(per_row.values()) <= ladder.MAX_BATCH_DIFF, per_row


def test_ladder_refuses_a_rung_that_moves_with_its_batch_mates(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    dev_ids = _ingest_toy(home, tmp_path)
    model = _sharpened(_tiny_with_dev(tmp_path / "sharp", dev_ids))

    verdict = ladder.measure(model, home, threads=1)
    fp32, int8 = verdict.rung("fp32"), verdict.rung("int8")
    assert fp32 is not None and int8 is not None
    assert fp32.batch_max_diff is not None and fp32.batch_max_diff <= ladder.MAX_BATCH_DIFF
    assert int8.batch_max_diff is not None and int8.batch_max_diff <= ladder.MAX_BATCH_DIFF
    assert "batch-invariant" not in int8.reason
    assert verdict.to_tags()["simpair.precision.int8.batch_max_diff"] == f"{int8.batch_max_diff:.6g}"

    # the same model with ONNX Runtime's dynamic int8 (a real graph, one scale per batch tensor); a
    # copy, since a process keeps the scoring forward pass it loaded for a model folder
    monkeypatch.setattr(int8_backend, "DEFAULT_MODE", "dynamic")
    verdict = ladder.measure(Path(shutil.copytree(model, tmp_path / "sharp-dynamic")), home, threads=1)
    int8 = verdict.rung("int8")
    assert int8 is not None and int8.verdict == "refused"
    assert int8.batch_max_diff is not None and int8.batch_max_diff > ladder.MAX_BATCH_DIFF
    assert "not batch-invariant" in int8.reason and "between batch sizes 64 and 8" in int8.reason
    assert verdict.choose().precision != "int8"
    assert "not batch-invariant" in verdict.why(verdict.choose())
