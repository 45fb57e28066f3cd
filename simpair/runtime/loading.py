"""Load a pinned model once per process, with the forward pass the options ask for.

`load_for_run` is what a run's stages call (scoring chunks, mining, encoding): the precision is the
run's, already resolved (`resolve.resolve`), and a process that cannot run it natively
refuses rather than fall back. `load_pinned` is the same loader on its own (benchmarks, notebooks):
it checks the names and resolves the precision itself, falling back from bf16 with a warning.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from simpair.models.metadata import COMPOSITE_KINDS
from simpair.runtime.options import RuntimeOptions
from simpair.runtime.precision import check_precision, require_native, runnable_precision, warn_fallback

log = logging.getLogger(__name__)

_LOAD_LOCK = threading.Lock()


class PairPredictor(Protocol):
    """What scoring needs from a loaded model (implemented by `simpair.runtime.predictors.load_predictor`)."""

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


def load_for_run(local_dir: str, runtime: RuntimeOptions, precision: str = "fp32") -> PairPredictor:
    """The pinned model for a run's stage, in the run's resolved `precision` (never another one).

    Each process (a Dask worker too) loads it once; `runtime` gives the threads and the backend.
    """
    from simpair.models.device import pick_device

    if precision == "auto":  # resolved once per run (`resolve.resolve`), never per process
        raise ValueError("load_for_run needs the run's resolved precision, not auto")
    require_native(precision, pick_device("auto"))
    threads = runtime.threads or default_threads()
    with _LOAD_LOCK:  # every argument spelled out: `load_pinned` must hit the same cache entry
        return _load(local_dir, threads, runtime.backend, precision, precision, None, True)


def load_pinned(
    local_dir: str,
    threads: int,
    backend: str = "torch",
    precision: str = "fp32",
    bf16_via: str | None = None,
    recheck: bool = True,
) -> PairPredictor:
    """Load a pinned model once per process (each Dask worker process keeps its own copy).

    The lock stops several chunk threads of one process from all loading the same model at once.
    `backend="onnx"` runs the forward pass in ONNX Runtime (see `onnx_backend`). `precision="bf16"`
    runs on OpenVINO or under torch's bf16 autocast (`bf16_runtime`; `bf16_via` forces one, as the
    precision ladder does to measure both), members of a stacked model too, where bf16 is native, and
    falls back to fp32 with a warning elsewhere. `precision="auto"` takes the model's cached precision
    verdict (fp32 without one; never measures). A bf16 or int8 rung the verdict accepted with an fp32
    recheck near the threshold (`simpair.runtime.recheck`) loads with it, unless `recheck` is False
    (the ladder measures each runtime plain first).
    """
    from simpair.models.device import pick_device

    check_precision(precision, backend)
    if precision == "auto":
        from simpair.models.precision_verdict import PrecisionVerdict
        from simpair.runtime.precision import allowed_rungs

        verdict = PrecisionVerdict.read(local_dir)
        allowed = allowed_rungs(backend, pick_device("auto"))
        precision = verdict.choose(allowed).precision if verdict else "fp32"
    effective = runnable_precision(precision, pick_device("auto"))
    with _LOAD_LOCK:
        # keyed by the precision run *and* the one asked for: a fallback warns once per process
        return _load(local_dir, threads, backend, effective, precision, bf16_via, recheck)


@lru_cache(maxsize=4)
def _load(
    local_dir: str,
    threads: int,
    backend: str,
    precision: str,
    requested: str,
    bf16_via: str | None = None,
    recheck: bool = True,
) -> PairPredictor:
    predictor = _build(local_dir, threads, backend, precision, requested, bf16_via)
    return _with_recheck(predictor, local_dir, threads, backend, precision) if recheck else predictor


def _with_recheck(predictor: Any, local_dir: str, threads: int, backend: str, precision: str) -> Any:
    """The predictor with fp32 scoring the pairs near its threshold, when its precision's rung was
    accepted that way (`simpair.runtime.recheck`); else the predictor as it is."""
    from simpair.models.precision_verdict import PrecisionVerdict
    from simpair.runtime import recheck

    verdict = PrecisionVerdict.read(local_dir) if precision != "fp32" else None
    rung = verdict.rung(precision) if verdict is not None else None
    if rung is None or not rung.accepted or rung.recheck_band is None or not recheck.supports(predictor):
        return predictor
    exact = _load(local_dir, threads, backend, "fp32", "fp32", None, True)
    return recheck.ThresholdRecheck(predictor, exact, rung.recheck_band)


def _build(
    local_dir: str, threads: int, backend: str, precision: str, requested: str, bf16_via: str | None
) -> PairPredictor:
    import torch

    from simpair.runtime.predictors import load_predictor

    torch.set_num_threads(threads)
    if precision == "int8":  # fp32 weights on CPU, quantized for ONNX Runtime's CPU provider
        from simpair.runtime.int8_backend import use_int8

        return use_int8(load_predictor(local_dir, device="cpu", precision="fp32"), threads)
    # Always explicit: load_predictor's own default ("auto") would pick bf16 on CUDA.
    predictor = load_predictor(local_dir, precision=precision)
    if precision != requested:
        warn_fallback(predictor.device)
    if precision == "bf16":  # ONNX Runtime has no fast bf16 on CPU: OpenVINO, else torch autocast
        if (bf16_via or bf16_runtime(local_dir, backend, predictor.device)) == "openvino":
            from simpair.runtime.openvino_backend import use_openvino

            return use_openvino(predictor, threads)
        from simpair.runtime.bf16_backend import use_bf16

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


def bf16_runtimes(backend: str, device: Any) -> tuple[str, ...]:
    """The bf16 runtimes this process can run, fastest first (the ladder measures each)."""
    from simpair.runtime import openvino_backend

    cpu = getattr(device, "type", str(device)) == "cpu"
    return ("openvino", "torch") if backend == "auto" and cpu and openvino_backend.available() else ("torch",)


def bf16_runtime(local_dir: str, backend: str, device: Any) -> str:
    """Which runtime scores a model in bf16 here: "openvino" or "torch" (autocast).

    The runtime that measured the model's bf16 rung, when its precision verdict has one (verdicts
    without the field were measured with torch), so a model scores the way the ladder judged it;
    else OpenVINO on CPU with backend auto when the package is installed, else torch. `--backend
    torch` and CUDA always mean torch.
    """
    from simpair.models.precision_verdict import PrecisionVerdict

    runnable = bf16_runtimes(backend, device)
    verdict = PrecisionVerdict.read(local_dir)
    rung = verdict.rung("bf16") if verdict is not None else None
    measured = (rung.runtime or "torch") if rung is not None and rung.verdict != "skipped" else None
    if measured in runnable:
        return measured
    if measured == "openvino" and backend == "auto" and getattr(device, "type", str(device)) == "cpu":
        log.warning(
            "%s: its bf16 was judged on OpenVINO, which is not installed here; using torch", local_dir
        )
    return runnable[0]


def _with_onnx(predictor: Any, threads: int) -> Any:
    """ONNX Runtime forward passes; a stacked model or a cascade gets them in each of its members."""
    from simpair.runtime.onnx_backend import use_onnx

    if predictor.kind in COMPOSITE_KINDS:
        predictor.members = [use_onnx(member, threads) for member in predictor.members]
        return predictor
    return use_onnx(predictor, threads)
