"""The one model loader: a saved model folder, or a pinned registry reference, becomes a predictor here.

Every path from a model to scores goes through `load_predictor`: evaluation, the promotion gate and
WiSE-FT path, the MLflow pyfunc, `simpair predict`, bulk scoring, mining and encoding, the precision
ladder and the benchmarks. A stacked model or a cascade loads its members through it too, and the
ensemble fitters (one floor up) load theirs through it; `simpair.models.Predictor.load` builds
one single model and nothing above the model packages calls it but this module
(`tests/test_layout.py` checks it). A registry spec (`name@alias`) is pinned first
(`model_ref.resolve_model_ref`, so one run never mixes two versions) and its `ModelRef` loaded here.

A model runs one of two ways, chosen by `backend`:

- `None` (the default): the model's own torch forward pass as it was saved, fp32 unless `precision`
  asks otherwise (`bf16`, or `auto`: bf16 on CUDA). Evaluation, the promotion gate and the MLflow
  pyfunc produce metrics and decisions on it; every call loads a fresh copy.
- `"torch"`, `"onnx"` or `"auto"`: a scoring forward pass. Torch threads are set (default: this
  process's CPUs), ONNX Runtime, OpenVINO, torch bf16 autocast or an int8 graph runs as asked,
  `precision="auto"` takes the model's stored precision verdict (fp32 without one; never measures),
  bf16 where it is not native falls back to fp32 with a warning, and a rung the verdict accepted with
  an fp32 recheck near the threshold (`simpair.runtime.recheck`) loads with it unless `recheck` is
  False (the ladder measures each runtime plain first; the fp32 side is built when a pair first
  falls in the band, not at load). Loaded once per process, precision, band and bf16 runtime
  (`verdict_pin`): each Dask worker process keeps its own copy, a process that outlives a re-measured
  verdict loads again unless a run pinned what it loads with (`load_for_run`), and a lock stops a
  process's chunk threads loading one model together. Exported, quantized and compiled graphs are
  kept across processes in the graph cache (`graph_cache`), so only the first process to load a
  model version on a host pays for them.

`load_for_run` is the same door for a run's stages (scoring chunks, mining, encoding): the precision
is the run's, already resolved (`resolve.resolve`), and so are the recheck band and bf16 runtime it
loads with (`resolve.resolve_run`), so a verdict re-measured while the run goes on changes nothing
before the next run; a process that cannot run the precision natively refuses rather than fall back.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from simpair.models.int8_check import int8_graph
from simpair.models.metadata import COMPOSITE_KINDS, METADATA_FILE, ModelMetadata
from simpair.models.predictor_base import BasePredictor
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import ForwardPin, RuntimeOptions
from simpair.runtime.precision import check_precision, require_native, runnable_precision, warn_fallback

log = logging.getLogger(__name__)

_LOAD_LOCK = threading.Lock()

# what scoring, mining and encoding are handed: any model kind, with the forward pass asked for
PairPredictor = BasePredictor


def default_threads(workers: int = 1) -> int:
    """Torch threads per worker: the CPUs this process may use, shared among workers on the host."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // max(workers, 1))


def load_predictor(
    model: str | Path | ModelRef,
    device: str = "auto",
    precision: str = "fp32",
    *,
    backend: str | None = None,
    threads: int | None = None,
    bf16_via: str | None = None,
    recheck: bool = True,
    pin: ForwardPin | None = None,
) -> Any:
    """A model folder (any kind: plain, soup, stacked, cascade) or a pinned `ModelRef`, loaded.

    `backend=None` gives the model's own torch forward pass, a new copy each call; a backend gives
    the scoring forward pass, once per process (see the module's docstring). `bf16_via` forces the
    bf16 runtime ("openvino" or "torch"), as the precision ladder does to measure both. `pin` (a run's,
    for its explicit `precision`) gives what it loads with instead of the verdict file (`ForwardPin`).
    """
    local_dir = model.local_dir if isinstance(model, ModelRef) else str(model)
    if backend is None:
        return _open(Path(local_dir), device, precision)
    from simpair.models.device import pick_device

    check_precision(precision, backend)
    if precision == "auto":
        from simpair.models.device import host_facts
        from simpair.models.precision_verdict import PrecisionVerdict, host_differences
        from simpair.runtime.precision import allowed_rungs

        verdict = PrecisionVerdict.read(local_dir)
        if verdict is not None and host_differences(verdict.host, host_facts(pick_device(device))):
            verdict = None  # measured on another host: fp32 until measured here, as `resolve` decides
        allowed = allowed_rungs(backend, pick_device(device))
        precision = verdict.choose(allowed).precision if verdict else "fp32"
    effective = runnable_precision(precision, pick_device(device))
    threads = threads or default_threads()
    if pin is None:  # what the verdict says now: a process that outlives a re-measure loads again
        pin = verdict_pin(local_dir, effective, backend, pick_device(device), bf16_via)
    elif pin.precision != effective:
        raise ValueError(f"the run is pinned to {pin.precision}, asked to load {effective}")
    with _LOAD_LOCK:
        # keyed by the precision run *and* the one asked for: a fallback warns once per process
        return _load(local_dir, device, threads, backend, effective, precision, bf16_via, recheck, pin)


def verdict_pin(
    local_dir: str, precision: str, backend: str, device: Any, bf16_via: str | None = None
) -> ForwardPin:
    """What `precision` loads with, as the model's stored verdict says now: the fp32 recheck band of
    its rung (when accepted that way) and, for bf16, the runtime that measured it (`bf16_runtime`),
    unless `bf16_via` forces one. Part of `_load`'s cache key, so equal pins share one copy whether a
    run or the verdict gave them."""
    from simpair.models.precision_verdict import PrecisionVerdict

    verdict = PrecisionVerdict.read(local_dir) if precision != "fp32" else None
    rung = verdict.rung(precision) if verdict is not None else None
    band = rung.recheck_band if rung is not None and rung.accepted else None
    via = (bf16_via or bf16_runtime(local_dir, backend, device)) if precision == "bf16" else None
    recipe = int8_graph() if precision == "int8" else None
    return ForwardPin(precision=precision, recheck_band=band, bf16_via=via, int8_graph=recipe)


def load_for_run(local_dir: str, runtime: RuntimeOptions, precision: str = "fp32") -> Any:
    """The pinned model for a run's stage, in the run's resolved `precision` (never another one).

    `runtime` gives the threads, the backend and the run's pin (recheck band, bf16 runtime, int8
    recipe); the copy is the one `load_predictor` keeps for the same arguments, so a process loads it
    once. A worker that cannot run the pinned bf16 runtime, or whose CPU builds another int8 recipe,
    refuses, as one without native bf16 does.
    """
    from simpair.models.device import pick_device

    if precision == "auto":  # resolved once per run (`resolve.resolve`), never per process
        raise ValueError("load_for_run needs the run's resolved precision, not auto")
    device = pick_device("auto")
    require_native(precision, device)
    via = runtime.pin.bf16_via if runtime.pin is not None else None
    if via is not None and via not in bf16_runtimes(runtime.backend, device):
        raise RuntimeError(
            f"this run is pinned to bf16 on {via}, which this worker ({device}) cannot run; "
            "install it where the workers run, or score with --precision fp32"
        )
    recipe = runtime.pin.int8_graph if runtime.pin is not None else None
    if recipe is not None and recipe != int8_graph():
        raise RuntimeError(
            f"this run is pinned to the int8 graph {recipe!r}, but this worker's CPU builds "
            f"{int8_graph()!r}; run the workers on CPUs like the driver's, or score with --precision fp32"
        )
    return load_predictor(
        local_dir, precision=precision, backend=runtime.backend, threads=runtime.threads, pin=runtime.pin
    )


def _open(model_dir: Path, device: str, precision: str, lazy: bool = False) -> Any:
    """The model's own torch forward pass: `Predictor.load` for a single model, else its members
    (each through this function) under the composite's predictor. `lazy`: each torch model is built
    when first used (a scoring backend whose graph is cached never uses it)."""
    meta = ModelMetadata.read(model_dir)
    if meta.kind not in COMPOSITE_KINDS:
        from simpair.models.predictor import Predictor  # torch and transformers: only when a model loads

        return Predictor.load(model_dir, device=device, precision=precision, lazy=lazy)
    # imported here: loading a plain model (scoring, the MLflow pyfunc) never pulls in the ensemble code
    from simpair.models.composite import CASCADE_FILE, STACK_FILE, CascadeSpec, StackSpec
    from simpair.runtime.cascade import CascadePredictor
    from simpair.runtime.stacked import StackedPredictor

    kind, spec_file, spec_type = {
        "stacked": (StackedPredictor, STACK_FILE, StackSpec),
        "cascade": (CascadePredictor, CASCADE_FILE, CascadeSpec),
    }[meta.kind]
    spec = spec_type.read(model_dir)
    members = []
    for rel in spec.members:
        path = model_dir / rel
        if not (path / METADATA_FILE).is_file():
            raise FileNotFoundError(f"{model_dir / spec_file}: member {rel!r} is missing ({path})")
        members.append(_open(path, device, precision, lazy))
    return kind(meta, spec, members, model_dir=model_dir)


@lru_cache(maxsize=4)
def _load(
    local_dir: str,
    device: str,
    threads: int,
    backend: str,
    precision: str,
    requested: str,
    bf16_via: str | None = None,
    recheck: bool = True,
    pin: ForwardPin | None = None,
) -> Any:
    """The scoring forward pass for `precision` (runnable here; `requested`: what was asked), with the
    fp32 recheck where `pin` (`verdict_pin`, or the run's) holds a band and `recheck` allows it."""
    import torch

    torch.set_num_threads(threads)
    model_dir = Path(local_dir)
    if precision == "int8":  # fp32 weights on CPU, quantized for ONNX Runtime's CPU provider
        from simpair.runtime.int8_backend import use_int8

        predictor = use_int8(_open(model_dir, "cpu", "fp32", lazy=True), threads)
    else:  # always explicit: the predictor's own "auto" would pick bf16 on CUDA
        predictor = _open(model_dir, device, precision, lazy=True)
        if precision != requested:
            warn_fallback(predictor.device)
        via = bf16_via or (pin.bf16_via if pin is not None else None)
        predictor = _forward_pass(predictor, model_dir, threads, backend, precision, via)
    if not recheck or precision == "fp32" or pin is None or pin.recheck_band is None:
        return predictor
    return _with_recheck(predictor, local_dir, device, threads, backend, pin.recheck_band)


def _with_recheck(
    predictor: Any, local_dir: str, device: str, threads: int, backend: str, band: float
) -> Any:
    """The predictor with fp32 scoring the pairs within `band` of its threshold
    (`simpair.runtime.recheck`), where the predictor's kind allows it; else the predictor as it is."""
    from simpair.runtime import recheck

    if not recheck.supports(predictor):
        return predictor

    def exact() -> Any:  # built when a pair first falls in the band, not at load (`_load` is cached)
        with _LOAD_LOCK:
            fp32 = ForwardPin(precision="fp32")  # the key a plain fp32 load has: one shared copy
            return _load(local_dir, device, threads, backend, "fp32", "fp32", None, True, fp32)

    return recheck.ThresholdRecheck(predictor, exact, band)


def _forward_pass(
    predictor: Any, model_dir: Path, threads: int, backend: str, precision: str, bf16_via: str | None
) -> Any:
    """The torch predictor with the forward pass `backend` and `precision` ask for put in."""
    if precision == "bf16":  # ONNX Runtime has no fast bf16 on CPU: OpenVINO, else torch autocast
        if (bf16_via or bf16_runtime(str(model_dir), backend, predictor.device)) == "openvino":
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
            torch_model = _open(model_dir, str(predictor.device), "fp32")  # unloadable weights raise here
            log.warning("ONNX Runtime unavailable for %s (%s); scoring with torch", model_dir, exc)
            return torch_model
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

    return predictor.each_member(lambda member: use_onnx(member, threads))
