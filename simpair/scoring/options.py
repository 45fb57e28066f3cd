"""The scoring options, typed once: what `simpair score`, the flow, its tasks and `score_inbox` accept.

One frozen object carries every setting of a run from the command line (or Python) to each stage,
and to Dask workers as a task argument, with one set of defaults (documented in docs/scoring.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from simpair.scoring.embedding_store import DEFAULT_MEMORY_MB
from simpair.scoring.scorer import check_precision

DEFAULT_CHUNK_ROWS = 8192
DEFAULT_BATCH_SIZE = 64
DEFAULT_BACKEND = "auto"  # ONNX Runtime on CPU when installed, else torch
DEFAULT_PRECISION = "fp32"  # scores identical to fp32 by default; bf16 is an explicit opt-in


class ScoringOptions(BaseModel):
    """How to score an inbox (where from and where to are the run's arguments, not options).

    - `model`: `name@alias`, `name/version` or a saved model folder; None = the paraphrase champion.
    - `home`: pipeline home holding the MLflow registry; None = `$SIMPAIR_HOME`.
    - `chunk_rows`: rows per chunk, the unit of resume and fan-out.
    - `batch_size`: pairs per forward pass (with the ONNX backend an upper bound).
    - `threads`: torch / ONNX Runtime threads per worker; None = CPUs / workers.
    - `backend`: `auto`, `torch` or `onnx`.
    - `precision`: `fp32`, the opt-in `bf16` (not with backend `onnx`) or `int8` (not with `torch`;
      refused unless the model passes the parity guard, `int8_guard`).
    - `lock_wait`: seconds to wait for another run holding the output; 0 = give up at once.
    - `contract`: the scoring-input contract file; None = `data_contracts/scoring_input.yaml`.
    - `embedding_store`: bi-encoders look sentence vectors up in a store kept for the whole run, so
      each distinct sentence is encoded once (default on; off = dedup within a chunk only).
    - `embedding_cache`: a folder keeping that store across runs (nights), per model identity;
      None = `<out>/_ledger/embeddings/`, removed when a run finishes.
    - `embedding_memory_mb`: the store's in-memory bound per worker process (more goes to disk).
    - `rescore`: also score batches that another model version already scored (each version once;
      the other versions' outputs stay), see `simpair.scoring.rescore`.
    - `rescore_days`: with `rescore`, only batches first claimed at most this many days ago.
    - `rescore_days_after_promotion`: when the pinned version differs from the one the last finished
      run on this output used, re-score the batches of the last N days; 0 = off.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = None
    home: Path | None = None
    chunk_rows: PositiveInt = DEFAULT_CHUNK_ROWS
    batch_size: PositiveInt = DEFAULT_BATCH_SIZE
    threads: PositiveInt | None = None
    backend: str = DEFAULT_BACKEND
    precision: str = DEFAULT_PRECISION
    lock_wait: NonNegativeFloat = 0.0
    contract: Path | None = None
    embedding_store: bool = True
    embedding_cache: Path | None = None
    embedding_memory_mb: PositiveFloat = DEFAULT_MEMORY_MB
    rescore: bool = False
    rescore_days: NonNegativeInt | None = None
    rescore_days_after_promotion: NonNegativeInt = 0

    @model_validator(mode="after")
    def _known_backend_and_precision(self) -> ScoringOptions:
        check_precision(self.precision, self.backend)
        if self.embedding_cache is not None and not self.embedding_store:
            raise ValueError("embedding_cache keeps the embedding store: it needs embedding_store on")
        if self.rescore_days is not None and not self.rescore:
            raise ValueError("rescore_days limits a re-score: it needs rescore on")
        return self

    @classmethod
    def build(cls, base: ScoringOptions | None = None, /, **changes: Any) -> ScoringOptions:
        """`base` (default: all defaults) with the given fields changed; a None change keeps base's value.

        For the Python entry points (`score_inbox`, the flow's `run`) that take fields as keywords.
        """
        fields = dict(base or cls()) | {k: v for k, v in changes.items() if v is not None}
        return cls(**fields)
