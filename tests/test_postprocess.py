"""Bi-encoder embedding post-processing: the transform itself, training, reload, ONNX and soups."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from registry_helpers import one_torch_thread  # noqa: F401 (fixture)
from test_ensemble import _member
from test_training_toydata import write_toy_home

from simpair.catalog import Catalog
from simpair.ensemble import fit_soup
from simpair.ensemble.postprocess_refit import train_sentences
from simpair.evaluation import graded_metrics
from simpair.models.embedding_postprocess import POSTPROCESS_FILE, EmbeddingPostprocess
from simpair.runtime.loader import load_predictor
from simpair.runtime.onnx_backend import use_onnx
from simpair.training import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _mean_pair_cosine(x: np.ndarray) -> float:
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return float((x[::2] * x[1::2]).sum(1).mean())


def test_transform_centres_and_removes_the_dominant_direction() -> None:
    """Embeddings sharing one big component, spread mostly along another direction (as after CoSENT)."""
    rng = np.random.default_rng(0)
    hidden = 32
    common, spread = _unit(rng.normal(size=hidden)), rng.normal(size=hidden)
    spread = _unit(spread - (spread @ common) * common)
    x = 3 * common + 0.3 * rng.normal(size=(600, hidden)) + 1.5 * rng.normal(size=(600, 1)) * spread
    assert _mean_pair_cosine(x) > 0.6  # everything looks similar to everything

    post = EmbeddingPostprocess.fit(x, 1)
    assert abs(float(post.directions[0] @ torch.from_numpy(spread).float())) > 0.95
    y = post(torch.from_numpy(x).float()).numpy()
    assert np.abs(y @ post.directions[0].numpy()).max() < 1e-5  # the top direction is gone
    unit_rows = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert (y @ spread).std() < 0.1 * (unit_rows @ spread).std()
    assert np.linalg.norm(y.mean(0)) < 0.05  # centred (up to what the projection removed)
    assert abs(_mean_pair_cosine(y)) < 0.1  # unrelated rows are no longer alike

    centred_only = EmbeddingPostprocess.fit(x, 0)
    assert centred_only.n_directions == 0
    z = centred_only(torch.from_numpy(x).float()).numpy()
    np.testing.assert_allclose(z, unit_rows - unit_rows.mean(0), atol=1e-5)

    with pytest.raises(ValueError, match="need more than 3 embeddings"):
        EmbeddingPostprocess.fit(x[:3], 3)


def test_postprocess_is_refused_for_cross_encoders() -> None:
    config = _member("sts", "cross", "bce", "cross", postprocess={"remove_directions": 1})
    with pytest.raises(ValueError, match="postprocess is for bi-encoder"):
        TrainConfig.model_validate(config)


def _train(home: Path, name: str, **changes: object) -> Path:
    config = _member("sts", "bi", "cosent", name, num_threads=1, **changes)
    return train(TrainConfig.model_validate(config), home).model_dir


def _dev(home: Path, model_dir: Path) -> tuple[list[str], list[str], np.ndarray]:
    ids = (model_dir / "dev_pair_ids.txt").read_text().split()
    frame = Catalog(home).read_split("stsb", "dev")
    frame = frame.filter(frame["pair_id"].is_in(ids))
    return frame["text_a"].to_list(), frame["text_b"].to_list(), frame["score"].to_numpy()


def _assert_fitted_to_own_weights(model_dir: Path, home: Path, directions: int) -> EmbeddingPostprocess:
    """The saved transform is what a fresh fit on the model's own training sentences gives."""
    predictor = load_predictor(model_dir, device="cpu")
    saved = predictor.model.post
    assert saved is not None and saved.n_directions == directions
    sentences, _ = train_sentences([model_dir], home)
    predictor.model.post = None
    fresh = EmbeddingPostprocess.fit(predictor.embed(sentences), directions)
    torch.testing.assert_close(saved.mean, fresh.mean, atol=2e-5, rtol=0)
    dots = (saved.directions * fresh.directions).sum(-1).abs()  # a principal direction's sign is arbitrary
    torch.testing.assert_close(dots, torch.ones_like(dots), atol=1e-3, rtol=0)
    return saved


def test_trained_bi_encoder_saves_its_transform_and_every_backend_applies_it(home: Path) -> None:
    write_toy_home(home)
    model_dir = _train(home, "bi-post", postprocess={"remove_directions": 1})
    assert (model_dir / POSTPROCESS_FILE).is_file()
    meta = json.loads((model_dir / "simpair.json").read_text())
    sentences, splits = train_sentences([model_dir], home)
    assert meta["embedding_postprocess"] == {
        "remove_directions": 1,
        "fitted_on": splits,
        "sentences": len(sentences),
    }
    assert splits == ["stsb/train"]
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert "spearman" in metrics["dev_before_postprocess"]
    _assert_fitted_to_own_weights(model_dir, home, 1)

    # Reloaded, the model reproduces the dev metrics recorded after post-processing.
    a, b, gold = _dev(home, model_dir)
    predictor = load_predictor(model_dir, device="cpu")
    scores = predictor.predict(a, b)["score"]
    assert graded_metrics(scores, gold)["spearman"] == pytest.approx(metrics["dev"]["spearman"], abs=1e-6)
    predictor.model.post = None  # the transform changes the cosines (it is really applied)
    assert not np.allclose(
        predictor.predict_raw(a, b), load_predictor(model_dir).predict_raw(a, b), atol=1e-3
    )

    onnx = use_onnx(load_predictor(model_dir, device="cpu"), threads=1)
    np.testing.assert_allclose(onnx.predict(a, b)["score"], scores, atol=1e-5)

    # Training from it as a backbone starts from its weights, not its stale transform.
    child = _train(home, "bi-child", backbone=str(model_dir), epochs=1)
    assert not (child / POSTPROCESS_FILE).exists()
    assert json.loads((child / "simpair.json").read_text())["embedding_postprocess"] is None


def test_soup_fits_the_transform_to_its_own_averaged_weights(home: Path) -> None:
    write_toy_home(home)
    post = {"remove_directions": 1}
    first = _train(home, "seed-1", seed=1, postprocess=post)
    second = _train(home, "seed-2", seed=2, postprocess=post)
    plain = _train(home, "plain", seed=3)

    out = fit_soup([first, second], home, home / "models" / "soup")
    soup = json.loads((out / "metrics.json").read_text())
    assert json.loads((out / "simpair.json").read_text())["embedding_postprocess"]["remove_directions"] == 1
    saved = _assert_fitted_to_own_weights(out, home, 1)
    if len(soup["soup"]["kept"]) == 2:  # averaged weights: a transform neither ingredient had
        for ingredient in (first, second):
            assert not torch.allclose(saved.mean, EmbeddingPostprocess.load(ingredient).mean, atol=1e-4)

    with pytest.raises(ValueError, match="embedding post-processing"):
        fit_soup([first, plain], home, home / "models" / "mixed")
    mixed = fit_soup([first, plain], home, home / "models" / "mixed", remove_directions=0)
    _assert_fitted_to_own_weights(mixed, home, 0)
