"""The runtime options, typed once: how a model runs in this process for `score`, `mine` and `encode`.

Seven settings say how a pinned model runs, whatever the job: pairs (or sentences) per forward pass,
threads, the forward pass (`backend`), the precision asked for (`auto` by default, resolved once per run
and model by `resolve.resolve`) and the embedding store (on or off, a folder kept across runs, its
memory bound). `ScoringOptions` and `MineOptions` extend this object with their job's own
settings, and `encode_file` takes it as it is, so the three commands share one definition, one set
of checks and one rule for where the store lives. An eighth, `pin`, is the run's own: what the
precision was resolved with (`ForwardPin`), handed to every stage with the rest.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from simpair.defaults import DEFAULT_BATCH_SIZE
from simpair.runtime.embedding_store import DEFAULT_MEMORY_MB
from simpair.runtime.precision import DEFAULT_BACKEND, DEFAULT_PRECISION, check_backend, check_precision


class ForwardPin(BaseModel):
    """What a run reads once, beside the precision (`resolve.resolve_run`): the fp32 recheck band and
    the bf16 runtime from the pinned model's verdict, and the int8 recipe the driver builds. Every
    stage, thread and worker loads with these, so a verdict re-measured while a run goes on changes
    nothing before the next run: one run never scores some pairs one way and the rest another."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    precision: str
    recheck_band: NonNegativeFloat | None = None  # None: no fp32 recheck
    bf16_via: str | None = None  # "openvino" or "torch" when the precision is bf16
    int8_graph: str | None = None  # the int8 recipe the verdict or check was judged on (`int8_graph`)


class RuntimeOptions(BaseModel):
    """How the pinned model runs (frozen: it travels whole to every stage, thread and Dask worker).

    - `batch_size`: pairs (or sentences) per forward pass (with the ONNX backend an upper bound).
    - `threads`: torch or OpenVINO threads, or ONNX Runtime batches at once, per worker (None: CPUs /
      workers).
    - `backend`: `auto` (ONNX Runtime on CPU when installed, else torch), `torch` or `onnx`.
    - `precision`: `auto` (the fastest rung of the model's cached precision verdict that keeps its dev
      decisions, `simpair.selection.precision_ladder`), `fp32`, `bf16` (not with backend `onnx`) or
      `int8` (not with `torch`; refused unless the model passes the parity guard, `int8_guard`).
      A job resolves it once per model before it loads one (`resolve.resolve`); stages get the result.
    - `embedding_store`: bi-encoders look sentence vectors up in a store kept for the whole run, so
      each distinct sentence is encoded once.
    - `embedding_cache`: a folder keeping that store across runs, per model identity; None = the
      job's own folder, removed when a run finishes (`store_folder`).
    - `embedding_memory_mb`: the store's in-memory bound per worker process (more goes to disk).
    - `pin`: set by the process that starts a run, never by a user (`resolve.resolve_run`): the recheck
      band, bf16 runtime and int8 recipe the run's precision was resolved with; None reads them at load.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch_size: PositiveInt = DEFAULT_BATCH_SIZE
    threads: PositiveInt | None = None
    backend: str = DEFAULT_BACKEND
    precision: str = DEFAULT_PRECISION
    embedding_store: bool = True
    embedding_cache: Path | None = None
    embedding_memory_mb: PositiveFloat = DEFAULT_MEMORY_MB
    pin: ForwardPin | None = None

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, backend: str) -> str:
        return check_backend(backend)

    @model_validator(mode="after")
    def _precision_and_store(self) -> RuntimeOptions:
        check_precision(self.precision, self.backend)
        if self.embedding_cache is not None and not self.embedding_store:
            raise ValueError("embedding_cache keeps the embedding store: it needs embedding_store on")
        return self

    @property
    def runtime(self) -> RuntimeOptions:
        """These settings alone (what a stage that runs the model needs of a job's options)."""
        return RuntimeOptions(**{name: getattr(self, name) for name in RuntimeOptions.model_fields})

    @property
    def keeps_store(self) -> bool:
        """Whether the store outlives the run (a folder given as `embedding_cache`)."""
        return self.embedding_cache is not None

    def store_folder(self, default: str | Path) -> Path:
        """Where the run's store lives: the folder kept across runs, else `default` (the job's own)."""
        cache = self.embedding_cache
        return Path(cache).expanduser().resolve() if cache else Path(default)
