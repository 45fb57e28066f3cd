"""Load the pinned models mining needs and turn many texts into vectors with visible progress.

Why here and not `Predictor.embed` alone: `embed` tokenizes its whole call at once, so a million
sentences would hold a million token lists. Chunks of a few thousand distinct texts keep tokens
small, show progress per chunk (a bar on a terminal, plain lines in a log) and let the caller drop
each chunk's vectors once it has used them (corpus pieces).

Vectors go through the embedding store `simpair score` uses (`simpair.runtime.stored_predict`): a
text in both the input and the corpus is encoded once, a killed run's rerun reuses what it stored,
and with `--embedding-cache` tomorrow's run encodes only the new sentences (the same folder serves
scoring too, for the same model, precision and forward pass). Each job decides the precision of each
model once, before loading it (`resolve_precision`), as scoring does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simpair.progress import progress
from simpair.runtime.embedding_store import StoreCounts
from simpair.runtime.loader import load_for_run
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import DEFAULT_BATCH_SIZE, RuntimeOptions
from simpair.runtime.stored_predict import StoredEncoder, stored_encoder

log = logging.getLogger(__name__)

DEFAULT_ENCODE_CHUNK = 4096


class WrongModelKind(ValueError):
    """A model of the wrong kind for the job (a cross-encoder asked for embeddings, or the reverse)."""


def load_bi_encoder(model: ModelRef, runtime: RuntimeOptions, job: str = "simpair encode") -> object:
    """The pinned bi-encoder's `Predictor`; any other kind is refused with what to do instead."""
    check_bi_encoder(model, job)
    return _load(model, runtime)


def check_bi_encoder(model: ModelRef, job: str = "simpair encode") -> None:
    """Refuse any model but a bi-encoder, saying what to do instead (before anything is loaded)."""
    if model.kind != "bi":
        hint = (
            " (a cross-encoder scores pairs: pass it to `simpair mine --rerank`)"
            if model.kind == "cross"
            else ""
        )
        raise WrongModelKind(
            f"{job} needs a bi-encoder (sentence embeddings); {model.label} is a {model.kind} model{hint}"
        )


def load_reranker(model: ModelRef, runtime: RuntimeOptions) -> object:
    """The pinned pair scorer for re-ranking: a cross-encoder or a stacked model, never a bi-encoder."""
    check_reranker(model)
    return _load(model, runtime)


def check_reranker(model: ModelRef) -> None:
    """Refuse a bi-encoder as the re-ranker (before anything is loaded)."""
    if model.kind == "bi":
        raise WrongModelKind(
            f"--rerank needs a cross-encoder (or stacked model); {model.label} is a bi-encoder, "
            "which is what --model already scores with"
        )


def resolve_precision(
    model: ModelRef, runtime: RuntimeOptions, home: Path | None = None
) -> tuple[RuntimeOptions, str | None]:
    """`runtime` with the precision `model` runs in for this job, decided once as `simpair score` decides
    it (`resolve.resolve`), and the line that says why auto chose it (None for an explicit precision).

    `auto` takes the model's stored precision verdict (fp32 when it has none: nothing is measured
    here); an explicit `bf16` falls back to fp32 where it is not native; an explicit `int8` needs a
    stored int8 check that accepted it (`simpair.models.int8_check.Int8Refused` otherwise). With the
    default `auto`, encoded and mined vectors equal scored ones and share their stored vectors.
    """
    from simpair.runtime.resolve import resolve_run

    # with the recheck band and bf16 runtime the precision loads with, read from the same verdict
    precision, why, pin = resolve_run(runtime.precision, runtime.backend, model=model, home=home)
    log.info("%s: precision %s%s", model.label, precision, f" ({why})" if why else "")
    return runtime.model_copy(update={"precision": precision, "pin": pin}), why


def _load(model: ModelRef, runtime: RuntimeOptions) -> object:
    """The model as `simpair score` loads it: same backend choice (`auto`: ONNX Runtime on CPU when
    installed), in the job's resolved precision (`resolve_precision`; never `auto` here)."""
    return load_for_run(model.local_dir, runtime, runtime.precision)


def output_store(output: str | Path, runtime: RuntimeOptions) -> Path | None:
    """The run's store: `embedding_cache` (kept), else `<output>.embeddings/` (removed at the end).

    None when the store is off."""
    return runtime.store_folder(f"{output}.embeddings") if runtime.embedding_store else None


def bi_encoder(
    model: ModelRef, runtime: RuntimeOptions, store: str | Path | None, job: str = "simpair encode"
) -> StoredEncoder:
    """The pinned bi-encoder, its vectors looked up in the store in `store` first (None: no store)."""
    predictor = load_bi_encoder(model, runtime, job)
    return stored_encoder(predictor, model, store, runtime.embedding_memory_mb, runtime.precision)


@dataclass
class Encoded:
    """Vectors of distinct texts in order, and what the store did to get them."""

    vectors: np.ndarray
    counts: StoreCounts = field(default_factory=StoreCounts)


def embedding_dims(predictor: object) -> int:
    """Width of the model's sentence vectors, asked of the forward pass itself (any backend; never
    through a store, which would count and keep the probe)."""
    inner = predictor.predictor if isinstance(predictor, StoredEncoder) else predictor
    return int(inner.embed(["."], batch_size=1).shape[1])  # type: ignore[attr-defined]


def embed_chunks(
    predictor: object,
    texts: Sequence[str],
    *,
    chunk: int = DEFAULT_ENCODE_CHUNK,
    batch_size: int = DEFAULT_BATCH_SIZE,
    desc: str = "encode",
    show_progress: bool = True,
) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, L2-normalised float32 vectors) for consecutive chunks of `texts`, in order."""
    bar = progress(total=len(texts), desc=desc, unit="sentence", disable=not show_progress)
    try:
        for start in range(0, len(texts), chunk):
            part = list(texts[start : start + chunk])
            vectors = predictor.embed(part, batch_size=batch_size)  # type: ignore[attr-defined]
            bar.update(len(part))
            yield start, np.ascontiguousarray(vectors, dtype=np.float32)
    finally:
        bar.close()


def embed_all(predictor: object, texts: Sequence[str], **kwargs: object) -> np.ndarray:
    """Every text's vector in one (n, dims) array; for texts whose vectors must all stay (queries)."""
    out = np.empty((len(texts), embedding_dims(predictor)), dtype=np.float32)
    for start, vectors in embed_chunks(predictor, texts, **kwargs):  # type: ignore[arg-type]
        out[start : start + len(vectors)] = vectors
    return out
