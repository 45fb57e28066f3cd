"""Scores and vectors through the embedding store: a bi-encoder, or the bi-encoder members of a stack.

`predict_stored` scores pairs (`simpair score`); `StoredEncoder` gives sentence vectors (`simpair mine`
and `encode`). Both key the store the same way (`open_stores`), so the commands share stored vectors
of the same model, precision and forward pass.

Why stacks too: a stack's bi-encoder members embed sentences like any bi-encoder, so on a batch that
repeats sentences they cost what a lone bi-encoder costs with the store; only the cross-encoder
members still run once per distinct pair. Scores equal those without the store to float rounding:
the cosines are computed as the predictor computes them (normalised vectors, row-wise dot in
float32), then go through the same `from_raw` or stack combiner.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simpair.runtime.embedding_store import (
    DEFAULT_MEMORY_MB,
    EmbeddingStore,
    StoreCounts,
    model_identity,
    open_store,
)
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import DEFAULT_BATCH_SIZE

# a bi-encoder's own store; a stack's members' stores are keyed by member index
SELF = -1


def open_stores(
    predictor: Any, model: ModelRef, precision: str, folder: str, memory_mb: float
) -> dict[int, EmbeddingStore]:
    """The stores `predictor` scores through: {SELF: ...} for a bi-encoder, one per bi member of a stack.

    Keyed by the forward pass too (torch, ONNX Runtime, bf16): their vectors agree only to ~1e-6. A
    stack's members are keyed by the stack's identity and their index. Cross-encoders get none.
    """
    if predictor.kind == "bi":
        return {
            SELF: open_store(folder, model_identity(model, precision, type(predictor).__name__), memory_mb)
        }
    if predictor.kind not in ("stacked", "cascade"):  # a cascade's bi stage is its member 0
        return {}
    return {
        i: open_store(
            folder, f"{model_identity(model, precision, type(member).__name__)}|member {i}", memory_mb
        )
        for i, member in enumerate(predictor.members)
        if member.kind == "bi"
    }


def stored_cosines(
    predictor: Any,
    store: EmbeddingStore,
    text_a: list[str],
    text_b: list[str],
    batch_size: int,
    counts: StoreCounts,
) -> np.ndarray:
    """A bi-encoder's raw scores (cosines), its vectors from the store (`embed` on misses only)."""
    vectors, done = store.lookup(
        text_a + text_b, lambda misses: predictor.embed(misses, batch_size=batch_size)
    )
    counts.add(done)
    n = len(text_a)
    return np.einsum("ij,ij->i", vectors[:n], vectors[n:]).astype(np.float32)


def predict_stored(
    predictor: Any,
    stores: dict[int, EmbeddingStore],
    text_a: list[str],
    text_b: list[str],
    batch_size: int,
    counts: StoreCounts | None = None,
) -> dict[str, np.ndarray]:
    """`predictor.predict` with bi-encoder cosines from `stores` (`open_stores`), counted in `counts`."""
    done = StoreCounts()
    if SELF in stores:
        out = predictor.from_raw(stored_cosines(predictor, stores[SELF], text_a, text_b, batch_size, done))
    else:

        def member(i: int) -> Any:
            return lambda a, b: stored_cosines(predictor.members[i], stores[i], a, b, batch_size, done)

        raw = {i: member(i) for i in stores}
        out = predictor.predict(text_a, text_b, batch_size=batch_size, member_raw=raw)
    if counts is not None:
        counts.add(done)
    return out


class StoredEncoder:
    """A bi-encoder whose `embed` looks texts up in an embedding store first; counts what it did.

    Without a store every text it is given is encoded (and counted as encoded).
    """

    def __init__(self, predictor: Any, store: EmbeddingStore | None = None) -> None:
        self.predictor = predictor
        self.store = store
        self.counts = StoreCounts()

    def embed(self, texts: Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE) -> np.ndarray:
        def encode(misses: list[str]) -> np.ndarray:
            return self.predictor.embed(misses, batch_size=batch_size)

        if self.store is None:
            self.counts.encoded += len(texts)
            return encode(list(texts))
        vectors, done = self.store.lookup(list(texts), encode)
        self.counts.add(done)
        return vectors


def stored_encoder(
    predictor: Any,
    model: ModelRef,
    folder: str | Path | None,
    memory_mb: float = DEFAULT_MEMORY_MB,
    precision: str = "fp32",
) -> StoredEncoder:
    """A bi-encoder `predictor` (run in `precision`) over the store in `folder` for its identity;
    None: no store."""
    if folder is None:
        return StoredEncoder(predictor)
    stores = open_stores(predictor, model, precision, str(folder), memory_mb)
    return StoredEncoder(predictor, stores.get(SELF))
