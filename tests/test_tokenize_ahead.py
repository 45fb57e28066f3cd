"""Scoring tokenizes ahead of the model, through pretokenize's encoder, with the scores unchanged.

The reference is the path scoring took before: the tokenizer's own call on the whole input, then
`forward_sorted` over it. The producer is watched through a torch forward hook on the model and the
predictor's own `token_stats`, never a stand-in for the code under test.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from simpair.models import BiEncoder, Predictor
from simpair.models.inference import first_output, forward_sorted, normalized
from simpair.models.metadata import ModelMetadata
from simpair.models.tiny import save_tiny_model
from simpair.models.token_stream import DEPTH
from simpair.pair_tokens.encode import FastEncoder

MAX_LENGTH = 24  # short enough that many pairs below are truncated
THREAD = "simpair-tokenize-ahead"
WORDS = [
    "the", "cat", "sat", "on", "a", "mat", "while", "markets", "rose", "sharply,", "said", "officials;",
    "Ünïcödé", "café", "東京", "re-tokenize",
]  # fmt: skip


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)))) for _ in range(n)]


def _predictor(path: Path, kind: str, symmetric: bool = False) -> Predictor:
    save_tiny_model(path, kind=kind)
    meta = ModelMetadata.read(path)
    meta = meta.model_copy(update={"max_length": MAX_LENGTH, "symmetric": symmetric})
    meta.write(path)
    predictor = Predictor.load(path, device="cpu")
    predictor.block_rows = 16  # several blocks per call: rows are sorted within each
    return predictor


def _before(predictor: Predictor, a: list[str], b: list[str], batch_size: int) -> np.ndarray:
    """Raw outputs the way scoring computed them before: one tokenizer call, one global sort."""
    tok = predictor.tokenizer

    def run(enc: dict) -> np.ndarray:
        combine = normalized if isinstance(predictor.model, BiEncoder) else first_output
        return forward_sorted(
            predictor.model,
            [(enc["input_ids"], enc.get("token_type_ids"))],
            tok.pad_token_id or 0,
            predictor.device,
            None,
            batch_size=batch_size,
            combine=combine,
        )

    if predictor.kind == "cross":
        logits = run(tok(a, b, truncation=True, max_length=MAX_LENGTH))
        if predictor.meta.symmetric:
            logits = (logits + run(tok(b, a, truncation=True, max_length=MAX_LENGTH))) / 2
        return logits
    index = {t: i for i, t in enumerate(dict.fromkeys(a + b))}
    emb = run(tok(list(index), truncation=True, max_length=MAX_LENGTH))
    return np.einsum("ij,ij->i", emb[[index[t] for t in a]], emb[[index[t] for t in b]])


@pytest.mark.parametrize(("kind", "symmetric"), [("cross", False), ("cross", True), ("bi", False)])
def test_scores_equal_the_tokenizer_call_path(tmp_path: Path, kind: str, symmetric: bool) -> None:
    predictor = _predictor(tmp_path / "m", kind, symmetric)
    a, b = _texts(90, 1), _texts(90, 2)
    a[5], b[5] = "", "a lone text"  # an empty side
    assert isinstance(predictor.encoder, FastEncoder) and predictor.encoder.by_words
    got = predictor.predict_raw(a, b, batch_size=8)
    want = _before(predictor, a, b, batch_size=8)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(predictor.predict(a, b)["score"], predictor.from_raw(want)["score"], atol=1e-6)
    assert predictor.token_stats.blocks >= 6  # the call really went block by block
    truncated = predictor.truncated(a, b)
    assert 0 < truncated.sum() < len(a)  # both kinds of pair were compared
    tok = predictor.tokenizer
    if kind == "cross":
        full = [len(tok(x, y)["input_ids"]) for x, y in zip(a, b, strict=True)]
    else:
        full = [max(len(tok(x)["input_ids"]), len(tok(y)["input_ids"])) for x, y in zip(a, b, strict=True)]
    np.testing.assert_array_equal(truncated, np.array(full) > MAX_LENGTH)


def test_the_producer_tokenizes_the_next_blocks_while_the_model_runs(tmp_path: Path) -> None:
    """While the model's call on block k is still running, block k+1 gets tokenized, and the producer
    never runs more than the queue's depth ahead (memory stays flat)."""
    predictor = _predictor(tmp_path / "m", "cross")
    predictor.block_rows = 4  # one batch per block
    stats = predictor.token_stats
    ahead_during: list[bool] = []
    lead: list[int] = []

    def hook(module: torch.nn.Module, args: object, out: object) -> None:
        k = stats.batches  # this call is batch k (counted once it returns)
        deadline = time.perf_counter() + 5
        while stats.blocks < min(k + 2, 10) and time.perf_counter() < deadline:
            time.sleep(0.002)  # a slow model: the producer has the time to get ahead
        ahead_during.append(stats.blocks >= min(k + 2, 10))
        time.sleep(0.01)
        lead.append(stats.blocks - (k + 1))

    handle = predictor.model.register_forward_hook(hook)
    try:
        a, b = _texts(40, 3), _texts(40, 4)
        predictor.predict_raw(a, b, batch_size=4)
    finally:
        handle.remove()
    assert len(ahead_during) == 10 and all(ahead_during)
    assert max(lead) <= DEPTH + 1  # block k in the model, DEPTH queued, one waiting to be queued
    assert lead[0] < 9  # not everything was tokenized before the model started


def _no_producer_left() -> bool:
    for _ in range(100):
        if not any(t.name == THREAD and t.is_alive() for t in threading.enumerate()):
            return True
        time.sleep(0.01)
    return False


def test_an_error_in_tokenizing_reaches_the_caller_and_stops_the_producer(tmp_path: Path) -> None:
    predictor = _predictor(tmp_path / "m", "cross")
    a, b = _texts(64, 5), _texts(64, 6)
    b[50] = 7  # type: ignore[call-overload]  # not a text: Arrow refuses it in the producer's 4th block
    calls = []
    handle = predictor.model.register_forward_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises((pa.ArrowTypeError, pa.ArrowInvalid)):
            predictor.predict_raw(a, b, batch_size=8)
    finally:
        handle.remove()
    assert calls  # the model had run the first blocks when the error came
    assert _no_producer_left()


def test_an_error_in_the_model_stops_the_producer(tmp_path: Path) -> None:
    predictor = _predictor(tmp_path / "m", "bi")
    seen = []

    def fail(*_: object) -> None:
        seen.append(1)
        if len(seen) == 2:
            raise RuntimeError("the device fell over")

    handle = predictor.model.register_forward_hook(fail)
    try:
        with pytest.raises(RuntimeError, match="fell over"):
            predictor.embed(_texts(200, 7), batch_size=4)
    finally:
        handle.remove()
    assert _no_producer_left()
    assert predictor.embed(["still works"]).shape[0] == 1


@pytest.mark.parametrize("kind", ["cross", "bi"])
def test_onnx_lanes_run_batches_at_once_and_score_the_same(tmp_path: Path, kind: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An ONNX Runtime predictor runs one single-threaded batch per thread on its one session: the
    scores are those of one lane, and two batches really were in the session together."""
    from simpair.runtime.onnx_backend import OrtEncoder, build_encoder
    from simpair.runtime.onnx_backend import OrtPredictor as Ort

    monkeypatch.setenv("SIMPAIR_GRAPH_CACHE", str(tmp_path / "graphs"))
    base = _predictor(tmp_path / "m", kind)
    one, two = Ort(base, build_encoder(base, threads=1)), Ort(base, build_encoder(base, threads=2))
    assert (one.lanes, two.lanes) == (1, 2)
    a, b = _texts(120, 8), _texts(120, 9)
    inside, most = [0], [0]
    lock = threading.Lock()
    infer = OrtEncoder.infer

    def counted(self: OrtEncoder, feed: dict) -> object:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.005)  # long enough for the other lane to arrive
            return infer(self, feed)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(OrtEncoder, "infer", counted)
    want = one.predict_raw(a, b, batch_size=4)
    assert most[0] == 1
    got = two.predict_raw(a, b, batch_size=4)
    assert most[0] == 2
    np.testing.assert_array_equal(got, want)
