"""Backend and precision: which names are accepted, and which precision a run really scores in.

Checked once, where the options are built (`RuntimeOptions`, `ScoringOptions`), and resolved once, by
the process that starts a run (`resolve_precision`), before its first chunk; the resolved precision is
what every chunk and worker gets. `fp32` (default) gives scores equal to sentence-transformers' to
~1e-7. `bf16` is an explicit opt-in for throughput, run only where bf16 is native (CUDA with bf16, CPUs
with AVX512-BF16 or AMX): emulated bf16 is slower than fp32 and would still move the scores, so
elsewhere it falls back to fp32 with a warning. ONNX Runtime has no fast bf16 on CPU, so bf16 scores
with torch; the opt-in `int8` runs a quantized ONNX Runtime graph and needs `int8_guard`'s consent.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from simpair.model_ref import ModelRef
from simpair.runtime.int8_guard import require_int8

log = logging.getLogger(__name__)

BACKENDS = ("auto", "torch", "onnx")
PRECISIONS = ("fp32", "bf16", "int8")
DEFAULT_BACKEND = "auto"  # ONNX Runtime on CPU when installed, else torch
DEFAULT_PRECISION = "fp32"  # scores identical to fp32 by default; bf16 and int8 are explicit opt-ins


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
        warn_fallback(device)
    if precision == "int8":  # measured on the model's dev split, or read from its registry version
        require_int8(model, home)
    return effective


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
