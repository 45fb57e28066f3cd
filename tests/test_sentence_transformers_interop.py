"""Saved simpair models load in sentence-transformers and give the same numbers as our predictor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# imported plainly: the dev extra installs it, and without it this module fails to collect (an error,
# never a skip into green), as `shared_data` fails without the raw files
import sentence_transformers as st

from simpair.models import ModelMetadata, Predictor, save_model, save_tiny_model
from simpair.models.embedding_postprocess import EmbeddingPostprocess
from simpair.models.tiny import build_tiny

TEXTS = [
    "A cat sat on the mat.",
    "  Stocks fell sharply on Monday.  ",
    "He said no, " * 80,  # longer than max_length: both sides must truncate the same way
    "x",
    "Ünïcode façade — naïve café.",
]


def _st_embed(model_dir: Path) -> np.ndarray:
    model = st.SentenceTransformer(str(model_dir), device="cpu")
    return model.encode(TEXTS, batch_size=2, convert_to_numpy=True)


def test_tiny_bi_encoder_carries_module_files_and_matches(tmp_path: Path) -> None:
    model_dir = save_tiny_model(tmp_path / "bi", task="sts", kind="bi", seed=1)
    modules = json.loads((model_dir / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"] == 128
    assert json.loads((model_dir / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"]
    ours = Predictor.load(model_dir, device="cpu").embed(TEXTS, batch_size=3)
    np.testing.assert_allclose(_st_embed(model_dir), ours, atol=1e-5, rtol=0)


def test_post_processed_bi_encoder_is_expressed_with_dense_and_matches(tmp_path: Path) -> None:
    """Centre + remove directions is affine: a standard Dense + Normalize reproduce it exactly."""
    model, tokenizer = build_tiny("bi", seed=2)
    fitted = np.random.default_rng(0).normal(size=(64, model.hidden_size)) + 1.5
    model.post = EmbeddingPostprocess.fit(fitted, n_directions=2)
    meta = ModelMetadata(kind="bi", task="sts", objective="cosent", backbone="tiny", max_length=16)
    model_dir = save_model(model, tokenizer, tmp_path / "post", meta)
    types = [m["type"] for m in json.loads((model_dir / "modules.json").read_text())]
    assert types[-2:] == ["sentence_transformers.models.Dense", "sentence_transformers.models.Normalize"]
    ours = Predictor.load(model_dir, device="cpu").embed(TEXTS)
    np.testing.assert_allclose(_st_embed(model_dir), ours, atol=1e-5, rtol=0)


def test_cross_encoder_cls_loads_in_sentence_transformers_as_is(tmp_path: Path) -> None:
    """No files added for cross-encoders: the `cls` head is plain sequence classification already.

    sentence-transformers does not read `max_length` from simpair.json (it uses the tokenizer's 512),
    symmetric models average both orders and the segment-cosine head is ours alone, so equality holds
    for a `cls`, non-symmetric model on texts within max_length, which is what this pins down.
    """
    model_dir = save_tiny_model(tmp_path / "cross", task="paraphrase", kind="cross", seed=3)
    assert not (model_dir / "modules.json").exists()
    short = [t for t in TEXTS if len(t) < 100]
    a, b = short, short[::-1]
    theirs = st.CrossEncoder(str(model_dir), device="cpu").predict(list(zip(a, b, strict=True)))
    ours = Predictor.load(model_dir, device="cpu").predict(a, b)["probability"]
    np.testing.assert_allclose(theirs, ours, atol=1e-5, rtol=0)
