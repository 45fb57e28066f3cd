"""The ONNX Runtime backend: [CLS]-only last layer, token-budget batches, and the verified fallback.

Real ONNX Runtime sessions on real saved tiny BERT models; scores are compared with the torch
predictor on pairs long enough to be truncated, so padding, segments and truncation all take part.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import test_scoring_support as support
import torch

from simpair.runtime import onnx_backend
from simpair.runtime.loader import load_predictor
from simpair.runtime.onnx_backend import OrtPredictor, build_encoder, use_onnx

tiny_cross = support.tiny_cross
tiny_bi = support.tiny_bi


def _pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Pairs from 1 to ~150 words: short ones, and some past the tiny models' max_length."""
    rng = random.Random(seed)
    words = support.WORDS
    a = [" ".join(rng.choices(words, k=rng.choice([1, 3, 12, 40, 150]))) for _ in range(n)]
    b = [" ".join(rng.choices(words, k=rng.choice([1, 5, 20, 60]))) for _ in range(n)]
    return a, b


@pytest.mark.parametrize("budget", [onnx_backend.MAX_BATCH_TOKENS, 1])
def test_onnx_cross_encoder_uses_cls_last_layer_and_matches_torch(tiny_cross: Path, budget: int) -> None:
    """budget=1 forces one pair per batch: results must not depend on how pairs are batched."""
    torch.set_num_threads(1)
    a, b = _pairs(300, seed=1)
    want = load_predictor(tiny_cross).predict(a, b, batch_size=64)
    predictor = use_onnx(load_predictor(tiny_cross), threads=1)
    predictor.max_batch_tokens = budget
    assert isinstance(predictor, OrtPredictor) and predictor.variant == "cls-last-layer"
    got = predictor.predict(a, b, batch_size=64)
    assert set(got) == set(want) == {"score", "probability", "label"}
    np.testing.assert_allclose(got["score"], want["score"], atol=1e-6)
    np.testing.assert_array_equal(got["label"], want["label"])


def test_onnx_bi_encoder_exports_whole_model_and_matches_torch(tiny_bi: Path) -> None:
    torch.set_num_threads(1)
    a, b = _pairs(200, seed=2)
    want = load_predictor(tiny_bi).predict(a, b)
    predictor = use_onnx(load_predictor(tiny_bi), threads=1)
    assert predictor.variant == "plain"  # mean pooling reads every token: no rewrite applies
    np.testing.assert_allclose(predictor.predict(a, b)["score"], want["score"], atol=1e-6)


def test_a_wrong_rewrite_falls_back_to_the_plain_export(
    tiny_cross: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verification against torch is what makes the rewrite safe: a rewrite that computes
    something else (here: the head on the last token instead of [CLS]) must never be used."""

    class LastToken(onnx_backend.ClsLastLayerBert):
        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN201
            hidden = self.hf.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            return self.hf.classifier(self.hf.bert.pooler.activation(hidden[:, -1])).squeeze(-1)

    monkeypatch.setattr(onnx_backend, "cls_last_layer_model", lambda model, kind: LastToken(model.model))
    base = load_predictor(tiny_cross)
    encoder = build_encoder(base, threads=1)
    assert encoder.variant == "plain"
    a, b = _pairs(50, seed=3)
    want = load_predictor(tiny_cross).predict(a, b)["score"]
    np.testing.assert_allclose(OrtPredictor(base, encoder).predict(a, b)["score"], want, atol=1e-6)
