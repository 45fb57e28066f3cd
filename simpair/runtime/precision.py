"""Backend and precision: which names are accepted, and which precision a run really scores in.

Checked once, where the options are built (`RuntimeOptions`, `ScoringOptions`), and resolved once, by
the process that starts a run (`resolve.resolve`), before its first chunk; the resolved precision is what
every chunk and worker gets. `auto` (default) is the fastest rung of the model's precision ladder that
keeps its dev decisions (`simpair.selection.precision_ladder`: measured once per model, at
registration, import or `simpair models verdict`, and stored beside it; a run only reads it). `fp32` gives
scores equal to sentence-transformers' to ~1e-7. `bf16` runs only where bf16 is native (CUDA with bf16,
CPUs with AVX512-BF16 or AMX): emulated bf16 is slower than fp32 and would still move the scores, so
elsewhere an explicit bf16 falls back to fp32 with a warning. ONNX Runtime has no fast bf16 on CPU,
so bf16 scores with torch; `int8` runs a quantized ONNX Runtime graph and needs a stored int8 check
that accepted it (`simpair.selection.int8_guard`).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from simpair.defaults import DEFAULT_BACKEND as DEFAULT_BACKEND  # re-exported
from simpair.defaults import DEFAULT_PRECISION as DEFAULT_PRECISION

log = logging.getLogger(__name__)

BACKENDS = ("auto", "torch", "onnx")
PRECISIONS = ("auto", "fp32", "bf16", "int8")


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def check_precision(precision: str, backend: str) -> None:
    """Reject unknown names and `onnx` + `bf16` (ORT's CPU provider has no fast bf16 kernels)."""
    check_backend(backend)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "bf16" and backend == "onnx":
        raise ValueError(
            "precision bf16 runs on OpenVINO (--backend auto) or under torch's bf16 autocast; ONNX "
            "Runtime's CPU provider has no fast bf16 path. Use --backend torch or auto with --precision "
            "bf16, or --backend onnx with --precision fp32."
        )
    if precision == "int8" and backend == "torch":
        raise ValueError("precision int8 runs a quantized ONNX Runtime graph: use --backend auto or onnx")


def runnable_precision(precision: str, device: Any) -> str:
    """The precision a process on `device` actually scores in: bf16 only where it is native."""
    from simpair.models import device as devices  # torch only when a run starts (fast CLI --help)

    if precision == "bf16" and not devices.native_bf16(device):
        return "fp32"
    return precision


def allowed_rungs(backend: str, device: Any) -> tuple[str, ...]:
    """The precisions `auto` may pick for this backend and device: bf16 only where native."""
    from simpair.models import device as devices
    from simpair.models.precision_verdict import BACKEND_RUNGS

    return tuple(p for p in BACKEND_RUNGS[backend] if p != "bf16" or devices.native_bf16(device))


def require_native(precision: str, device: Any) -> None:
    """Refuse to run a resolved precision this process cannot run natively (a worker unlike the driver).

    A run pinned to bf16 by a driver with native bf16 fails on a worker without it rather than score
    some chunks in another precision than the rest of the run.
    """
    if runnable_precision(precision, device) != precision:
        raise RuntimeError(
            f"this run is pinned to {precision}, but this worker ({device}) has no native "
            f"{precision}; run the workers on hardware that has it, or score with --precision fp32"
        )


def warn_fallback(device: Any, stacklevel: int = 3) -> None:
    message = (
        f"precision bf16 asked, but {device} has no native bf16 (it needs CUDA with bf16, or a CPU "
        "with AVX512-BF16 or AMX); scoring in fp32 instead, since emulated bf16 is slower than fp32"
    )
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
    log.warning(message)
