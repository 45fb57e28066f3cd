"""The segment-cosine cross-encoder head: its formula, training, saved format, ONNX and refusals.

Tiny real BERT with the bundled vocabulary, real torch, real ONNX Runtime; nothing mocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow_store import seed_store
from safetensors.numpy import load_file
from test_training import config
from test_training_toydata import write_toy_home

from simpair.catalog import Catalog
from simpair.evaluation import graded_metrics
from simpair.models.batching import pad_batch
from simpair.models.cross_encoder import HEAD_FILE, INIT_BIAS, INIT_SCALE, CrossEncoder
from simpair.models.tiny import build_tiny
from simpair.registry.pyfunc import log_pyfunc
from simpair.runtime.loader import load_predictor
from simpair.runtime.onnx_backend import use_onnx
from simpair.training import TrainConfig, train

A = ["the cat sat on the mat", "stocks fell sharply on monday", "he said no"]
B = ["a cat was sitting on the mat", "shares dropped on monday after the report", "she said yes"]


# Tiny models run fastest on one thread, and the machine is shared: no oversubscription.
pytestmark = pytest.mark.usefixtures("one_thread")


def sts_cross(**changes: object) -> TrainConfig:
    return config(
        task="sts",
        train=[{"dataset": "stsb", "split": "train"}],
        dev={"split": "dev"},
        evaluate_on=[{"dataset": "stsb", "split": "test"}],
        cross_head="segment_cosine",
        head_learning_rate=1e-2,
        **changes,
    )


def test_head_is_the_scaled_cosine_of_each_texts_own_tokens() -> None:
    model, tokenizer = build_tiny("cross", seed=3, cross_head="segment_cosine")
    assert isinstance(model, CrossEncoder) and model.head == "segment_cosine"
    model.eval()
    enc = tokenizer(A, B)
    batch = pad_batch(enc["input_ids"], tokenizer.pad_token_id, enc["token_type_ids"])
    with torch.no_grad():
        got = model(**batch)
        hidden = model.model(**batch).last_hidden_state
    for i in range(len(A)):
        types, real = batch["token_type_ids"][i], batch["attention_mask"][i].bool()
        a = hidden[i][real & (types == 0)].mean(0)  # [CLS] a [SEP]
        b = hidden[i][real & (types == 1)].mean(0)  # b [SEP]; padding never counts
        want = INIT_SCALE * torch.nn.functional.cosine_similarity(a, b, dim=0) + INIT_BIAS
        assert float(got[i]) == pytest.approx(float(want), abs=1e-5)
    with pytest.raises(ValueError, match="needs token_type_ids"):
        model(batch["input_ids"], batch["attention_mask"])


def test_segment_cosine_cross_encoder_trains_saves_reloads_and_exports(home: Path) -> None:
    write_toy_home(home)
    result = train(sts_cross(epochs=3, learning_rate=5e-3), home)
    d = result.model_dir
    meta = json.loads((d / "simpair.json").read_text())
    assert meta["kind"] == "cross" and meta["cross_head"] == "segment_cosine"
    names = {p.name for p in d.iterdir()}
    assert {"model.safetensors", "config.json", HEAD_FILE} <= names
    assert not any(n.endswith((".bin", ".pkl", ".pt")) for n in names), "never pickle"
    head = load_file(d / HEAD_FILE)
    # The head learned: its scale and bias moved away from their initial values.
    assert abs(float(head["scale"][0]) - INIT_SCALE) > 1e-3 and abs(float(head["bias"][0]) - INIT_BIAS) > 1e-3
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < losses[0]

    # Reloaded, it reproduces the dev Spearman recorded at training time.
    dev = Catalog(home).read_split("stsb", "dev")
    pred = load_predictor(d)
    assert isinstance(pred.model, CrossEncoder) and pred.model.head == "segment_cosine"
    out = pred.predict(dev["text_a"].to_list(), dev["text_b"].to_list())
    again = graded_metrics(out["score"], dev["score"].to_numpy())
    assert again["spearman"] == pytest.approx(result.metrics["dev"]["spearman"], abs=1e-6)

    # Logged as an MLflow pyfunc (the whole directory, head file included), it serves the same scores.
    mlflow.set_tracking_uri(f"sqlite:///{seed_store(home)}")  # artifacts in tmp, not ./mlruns
    with mlflow.start_run():
        info = log_pyfunc(d, "sts")
    frame = pd.DataFrame({"text_a": dev["text_a"].to_list(), "text_b": dev["text_b"].to_list()})
    served = mlflow.pyfunc.load_model(info.model_uri).predict(frame)
    np.testing.assert_allclose(served["score"].to_numpy(), out["score"], atol=1e-6)

    # ONNX Runtime scores it like torch (the whole graph: the head reads every token, no [CLS] rewrite).
    onnx = use_onnx(load_predictor(d), threads=1)
    assert onnx.variant == "plain"
    got = onnx.predict(dev["text_a"].to_list(), dev["text_b"].to_list())["score"]
    np.testing.assert_allclose(got, out["score"], atol=1e-6)


def test_a_saved_head_is_loaded_and_a_plain_body_gets_a_fresh_one(home: Path, tmp_path: Path) -> None:
    write_toy_home(home)
    parent = train(sts_cross(epochs=1), home).model_dir
    saved = load_file(parent / HEAD_FILE)
    loaded = CrossEncoder.from_pretrained(parent, head="segment_cosine").pair_head
    assert loaded is not None
    assert float(loaded.scale.detach()) == float(saved["scale"][0]) != INIT_SCALE
    assert float(loaded.bias.detach()) == float(saved["bias"][0]) != INIT_BIAS
    # A body without a head file (a backbone, a bi-encoder, a `cls` cross-encoder) starts fresh.
    bi = train(
        config(
            task="sts",
            kind="bi",
            objective="cosent",
            train=[{"dataset": "stsb", "split": "train"}],
            dev={"split": "dev"},
            epochs=1,
        ),
        home,
    ).model_dir
    fresh = CrossEncoder.from_pretrained(bi, head="segment_cosine").pair_head
    assert fresh is not None
    assert (float(fresh.scale.detach()), float(fresh.bias.detach())) == (INIT_SCALE, INIT_BIAS)


def test_cross_head_is_refused_for_bi_encoders() -> None:
    with pytest.raises(ValueError, match="cross_head 'segment_cosine' is for cross-encoders"):
        config(kind="bi", objective="cosent", cross_head="segment_cosine")
    with pytest.raises(ValueError, match="cross_head"):
        config(cross_head="mean")
