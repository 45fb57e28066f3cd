"""The one place a run's precision is decided: once, by the process that starts the run.

`auto` (the default) takes the pinned model's precision verdict (`precision_ladder`); an explicit
`bf16` falls back to fp32 where it is not native; an explicit `int8` must pass the parity guard
(`int8_guard`). The result goes to every chunk and worker, so one run never mixes precisions.
"""

from __future__ import annotations

from typing import Any

from simpair.model_ref import ModelRef
from simpair.runtime.int8_guard import require_int8
from simpair.runtime.precision import check_precision, runnable_precision, warn_fallback
from simpair.runtime.precision_ladder import auto_precision


def resolve(
    precision: str, backend: str, device: Any | None = None, model: ModelRef | None = None, home: Any = None
) -> tuple[str, str | None]:
    """Decide a run's precision once, before its first chunk: (precision, why auto chose it, or None).

    `auto` reads the pinned model's precision verdict (measured once and cached when it has none). An
    explicit bf16 falls back to fp32 with a warning where it is not native.

    Called by the process that starts the run; the result is passed to every chunk (and worker),
    so all chunks of a run use the same precision. `device` defaults to the one `load_predictor`
    would pick here (CUDA if available, else CPU). int8 is refused (`int8_guard.Int8Refused`)
    unless the pinned `model` passes the parity guard (`home` holds its dev split and registry).
    """
    from simpair.models.device import pick_device

    check_precision(precision, backend)
    device = pick_device("auto") if device is None else device
    if precision == "auto":
        chosen = auto_precision(model, home, backend, device)
        return chosen.precision, chosen.why
    effective = runnable_precision(precision, device)
    if effective != precision:
        warn_fallback(device)
    if precision == "int8":  # measured on the model's dev split, or read from its registry version
        require_int8(model, home)
    return effective, None
