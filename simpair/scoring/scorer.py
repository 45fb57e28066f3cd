"""Score one validated chunk with the pinned model and build the output columns.

The predictor (simpair.models) already sorts by length, runs under `torch.inference_mode()` and,
for bi-encoders, encodes each distinct sentence once. On top of that, identical (a, b) pairs in a
chunk are scored once: duplicate-question and listing batches repeat pairs often, and a
cross-encoder's score of a pair does not depend on its neighbours.

Precision: `fp32` (default) gives scores equal to sentence-transformers' to ~1e-7, as
users who compare runs expect. `bf16` is an explicit opt-in for throughput: the torch forward pass under
`torch.autocast(bfloat16)`, outputs cast back to fp32 before sigmoid / cosine / calibration. It is
only run where bf16 is native (CUDA with bf16, CPUs with AVX512-BF16 or AMX): emulated bf16 is
slower than fp32 and would still move the scores, so elsewhere it falls back to fp32 with a warning.
ONNX Runtime has no fast bf16 on CPU, so bf16 scores with torch; opt-in int8 needs `int8_guard`'s consent.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache, partial
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from simpair.model_ref import ModelRef
from simpair.scoring.embedding_store import EmbeddingStore, StoreCounts
from simpair.scoring.int8_guard import require_int8
from simpair.scoring.stored_predict import predict_stored

log = logging.getLogger(__name__)

SCORE_COLUMNS = (
    "score",
    "label",
    "probability",
    "truncated",
    "model_name",
    "model_version",
    "model_run_id",
    "precision",
    "run_id",
    "scored_at",
)
SCORE_SCHEMA = pa.schema(
    [
        pa.field("score", pa.float32()),
        pa.field("label", pa.int8()),
        pa.field("probability", pa.float32()),
        pa.field("truncated", pa.bool_()),
        pa.field("model_name", pa.string()),
        pa.field("model_version", pa.string()),
        pa.field("model_run_id", pa.string()),
        pa.field("precision", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("scored_at", pa.timestamp("us", tz="UTC")),
    ]
)


class PairPredictor(Protocol):
    """What scoring needs from a loaded model (implemented by `simpair.predictors.load_predictor`)."""

    task: str
    kind: str

    def predict(
        self, text_a: list[str], text_b: list[str], batch_size: int = 64, progress: bool = False
    ) -> dict[str, np.ndarray]: ...

    def truncated(self, text_a: list[str], text_b: list[str]) -> np.ndarray: ...


def default_threads(workers: int = 1) -> int:
    """Torch threads per worker: the CPUs this process may use, shared among workers on the host."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // max(workers, 1))


_LOAD_LOCK = threading.Lock()
# Chunk tasks may run in threads of one process (Prefect's default task runner). The model already
# uses every core it is given, and a fast tokenizer is not safe to call from two threads at once
# ("Already borrowed"), so forward passes take turns; reading and writing chunks still overlap.
_PREDICT_LOCK = threading.Lock()
BACKENDS = ("auto", "torch", "onnx")
PRECISIONS = ("fp32", "bf16", "int8")


def check_precision(precision: str, backend: str) -> None:
    """Reject unknown names and `onnx` + `bf16` (ORT's CPU provider has no fast bf16 kernels)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "bf16" and backend == "onnx":
        raise ValueError(
            "precision bf16 runs the torch forward pass under bf16 autocast; ONNX Runtime's CPU "
            "provider has no fast bf16 path. Use --backend torch or auto with --precision bf16, "
            "or --backend onnx with --precision fp32."
        )
    if precision == "int8" and backend == "torch":
        raise ValueError("precision int8 runs a quantized ONNX Runtime graph: use --backend auto or onnx")


def runnable_precision(precision: str, device: Any) -> str:
    """The precision a process on `device` actually scores in: bf16 only where it is native."""
    from simpair.models import device as devices  # torch only when a run starts (fast CLI --help)

    if precision == "bf16" and not devices.native_bf16(device):
        return "fp32"
    return precision


def resolve_precision(
    precision: str, backend: str, device: Any | None = None, model: ModelRef | None = None, home: Any = None
) -> str:
    """Decide a run's precision once, before its first chunk, and warn if bf16 must fall back.

    Called by the process that starts the run; the result is passed to every chunk (and worker),
    so all chunks of a run use the same precision. `device` defaults to the one `load_predictor`
    would pick here (CUDA if available, else CPU). int8 is refused (`int8_guard.Int8Refused`)
    unless the pinned `model` passes the parity guard (`home` holds its dev split and registry).
    """
    from simpair.models.device import pick_device

    check_precision(precision, backend)
    device = pick_device("auto") if device is None else device
    effective = runnable_precision(precision, device)
    if effective != precision:
        _warn_fallback(device)
    if precision == "int8":  # measured on the model's dev split, or read from its registry version
        require_int8(model, home)
    return effective


def _warn_fallback(device: Any) -> None:
    message = (
        f"precision bf16 asked, but {device} has no native bf16 (it needs CUDA with bf16, or a CPU "
        "with AVX512-BF16 or AMX); scoring in fp32 instead, since emulated bf16 is slower than fp32"
    )
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    log.warning(message)


def load_pinned(
    local_dir: str, threads: int, backend: str = "torch", precision: str = "fp32"
) -> PairPredictor:
    """Load a pinned model once per process (each Dask worker process keeps its own copy).

    The lock stops several chunk threads of one process from all loading the same model at once.
    `backend="onnx"` runs the forward pass in ONNX Runtime (see `onnx_backend`). `precision="bf16"`
    runs the torch forward pass under bf16 autocast (members of a stacked model too) where bf16 is
    native, and falls back to fp32 with a warning elsewhere; `backend="auto"` then means torch.
    """
    from simpair.models.device import pick_device

    check_precision(precision, backend)
    effective = runnable_precision(precision, pick_device("auto"))
    with _LOAD_LOCK:
        # keyed by the precision run *and* the one asked for: a fallback warns once per process
        return _load(local_dir, threads, backend, effective, precision)


@lru_cache(maxsize=4)
def _load(local_dir: str, threads: int, backend: str, precision: str, requested: str) -> PairPredictor:
    import torch

    from simpair.predictors import load_predictor

    torch.set_num_threads(threads)
    if precision == "int8":  # fp32 weights on CPU, quantized for ONNX Runtime's CPU provider
        from simpair.scoring.int8_backend import use_int8

        return use_int8(load_predictor(local_dir, device="cpu", precision="fp32"), threads)
    # Always explicit: load_predictor's own default ("auto") would pick bf16 on CUDA.
    predictor = load_predictor(local_dir, precision=precision)
    if precision != requested:
        _warn_fallback(predictor.device)
    if precision == "bf16":  # a torch autocast path: ONNX Runtime has no fast bf16 on CPU
        from simpair.scoring.bf16_backend import use_bf16

        return use_bf16(predictor)
    if backend == "auto":
        if predictor.device.type != "cpu" or importlib.util.find_spec("onnxruntime") is None:
            return predictor
        try:
            return _with_onnx(predictor, threads)
        except Exception as exc:  # an architecture the exporter cannot handle: torch scores it the same
            log.warning("ONNX Runtime unavailable for %s (%s); scoring with torch", local_dir, exc)
            return load_predictor(local_dir, precision="fp32")
    if backend == "onnx":
        return _with_onnx(predictor, threads)
    return predictor


def _with_onnx(predictor: Any, threads: int) -> Any:
    """ONNX Runtime forward passes; a stacked model gets them in each of its members."""
    from simpair.scoring.onnx_backend import use_onnx

    if predictor.kind == "stacked":
        predictor.members = [use_onnx(member, threads) for member in predictor.members]
        return predictor
    return use_onnx(predictor, threads)


def predict_unique(
    predictor: PairPredictor,
    text_a: list[str],
    text_b: list[str],
    batch_size: int,
    predict: Callable[[list[str], list[str]], dict[str, np.ndarray]] | None = None,
) -> dict[str, np.ndarray]:
    """`predict` (default `predictor.predict`) on the distinct (a, b) pairs, expanded back to every row."""
    predict = predict or partial(predictor.predict, batch_size=batch_size)
    index: dict[tuple[str, str], int] = {}
    inverse = np.fromiter(
        (index.setdefault(pair, len(index)) for pair in zip(text_a, text_b, strict=True)),
        dtype=np.int64,
        count=len(text_a),
    )
    if len(index) == len(text_a):
        return predict(text_a, text_b)
    unique_a = [pair[0] for pair in index]
    unique_b = [pair[1] for pair in index]
    out = predict(unique_a, unique_b)
    return {key: np.asarray(value)[inverse] for key, value in out.items()}


def truncation_flags(predictor: PairPredictor, text_a: list[str], text_b: list[str]) -> np.ndarray:
    """`predictor.truncated`, asked only about pairs long enough to possibly exceed max_length.

    A WordPiece/BPE token always covers at least one character, so a pair with fewer characters
    than max_length minus the special tokens cannot be cut; short pairs (most questions, titles)
    skip a second tokenization.
    """
    max_length = int(getattr(predictor, "max_length", 0) or 0)
    if max_length <= 0:
        return np.asarray(predictor.truncated(text_a, text_b), dtype=bool)
    len_a = np.fromiter(map(len, text_a), dtype=np.int64, count=len(text_a))
    len_b = np.fromiter(map(len, text_b), dtype=np.int64, count=len(text_b))
    longest = np.maximum(len_a, len_b) if predictor.kind == "bi" else len_a + len_b  # stacks hold cross
    candidates = np.flatnonzero(longest + 3 > max_length)
    flags = np.zeros(len(text_a), dtype=bool)
    if candidates.size:
        flags[candidates] = predictor.truncated(
            [text_a[i] for i in candidates], [text_b[i] for i in candidates]
        )
    return flags


def score_columns(
    predictor: PairPredictor,
    model: ModelRef,
    run_id: str,
    text_a: list[str],
    text_b: list[str],
    cut: np.ndarray,
    batch_size: int,
    *,
    precision: str,
    stores: dict[int, EmbeddingStore] | None = None,
    counts: StoreCounts | None = None,
) -> pa.Table:
    """The columns scoring adds to a chunk's kept rows (schema `SCORE_SCHEMA`).

    `precision` is the one the predictor runs in (`fp32` or `bf16`), written on every row next to
    the model version so a reader of a scored file knows how its scores were computed. With `stores`
    (`open_stores`: a bi-encoder, or a stack's bi members) only sentences not seen are encoded; what
    the stores did is added to `counts`.
    """
    n = len(text_a)
    if n:
        with _PREDICT_LOCK:  # one forward pass at a time per process (see _PREDICT_LOCK)
            stored = partial(predict_stored, predictor, stores, batch_size=batch_size, counts=counts)
            out = predict_unique(predictor, text_a, text_b, batch_size, stored if stores else None)
            truncated = np.asarray(cut, dtype=bool) | truncation_flags(predictor, text_a, text_b)
    else:
        out, truncated = {"score": np.zeros(0, np.float32)}, np.zeros(0, dtype=bool)
    probability = out.get("probability")
    label = out.get("label")
    scored_at = datetime.now(UTC)
    label_column = (
        pa.nulls(n, pa.int8()) if label is None else pa.array(np.asarray(label, np.int8), pa.int8())
    )
    prob_column = (
        pa.nulls(n, pa.float32()) if probability is None else pa.array(np.asarray(probability, np.float32))
    )
    columns = [
        pa.array(np.asarray(out["score"], dtype=np.float32), pa.float32()),
        label_column,
        prob_column,
        pa.array(truncated, pa.bool_()),
        pa.array([model.name] * n, pa.string()),
        pa.array([model.version] * n, pa.string()),
        pa.array([model.run_id] * n, pa.string()),
        pa.array([precision] * n, pa.string()),
        pa.array([run_id] * n, pa.string()),
        pa.array([scored_at] * n, pa.timestamp("us", tz="UTC")),
    ]
    return pa.Table.from_arrays(columns, schema=SCORE_SCHEMA)
