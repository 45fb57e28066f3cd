"""Score one validated chunk with the pinned model and build the output columns.

The predictor (simpair.models) already sorts by length, runs under `torch.inference_mode()` and,
for bi-encoders, encodes each distinct sentence once. On top of that, identical (a, b) pairs in a
chunk are scored once: duplicate-question and listing batches repeat pairs often, and a
cross-encoder's score of a pair does not depend on its neighbours. How the model is loaded and in
which precision it runs is `simpair.runtime`'s; the precision is written on every output row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

import numpy as np
import pyarrow as pa

from simpair.runtime.embedding_store import EmbeddingStore, StoreCounts
from simpair.runtime.loader import PairPredictor
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.stored_predict import predict_stored

SCORE_COLUMNS = (
    "score",
    "label",
    "probability",
    "scored_by",
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
        # which model scored the row: a cascade's stage (`bi` or `cross`), else the model's kind
        pa.field("scored_by", pa.string()),
        pa.field("truncated", pa.bool_()),
        pa.field("model_name", pa.string()),
        pa.field("model_version", pa.string()),
        pa.field("model_run_id", pa.string()),
        pa.field("precision", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("scored_at", pa.timestamp("us", tz="UTC")),
    ]
)


# Chunk tasks may run in threads of one process (Prefect's default task runner). The model already
# uses every core it is given, and a fast tokenizer is not safe to call from two threads at once
# ("Already borrowed"), so forward passes take turns; reading and writing chunks still overlap.
_PREDICT_LOCK = threading.Lock()


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
    the model version so a reader of a scored file knows how its scores were computed, and so is
    `scored_by`: the stage of a cascade that scored the row (`bi` or `cross`), else the model's kind.
    With `stores` (`open_stores`: a bi-encoder, a stack's bi members, a cascade's bi stage) only
    sentences not seen are encoded; what the stores did is added to `counts`.
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
    stage = out.get("scored_by")
    scored_by = pa.array([predictor.kind] * n if stage is None else np.asarray(stage).tolist(), pa.string())
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
        scored_by,
        pa.array(truncated, pa.bool_()),
        pa.array([model.name] * n, pa.string()),
        pa.array([model.version] * n, pa.string()),
        pa.array([model.run_id] * n, pa.string()),
        pa.array([precision] * n, pa.string()),
        pa.array([run_id] * n, pa.string()),
        pa.array([scored_at] * n, pa.timestamp("us", tz="UTC")),
    ]
    return pa.Table.from_arrays(columns, schema=SCORE_SCHEMA)
