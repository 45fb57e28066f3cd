"""Device and precision choice shared by training and prediction.

CUDA with bf16 autocast when a GPU is present (Ampere and later run bf16 matmuls at full rate, and bf16
needs no loss scaling, unlike fp16); fp32 on CPU unless asked, because bf16 autocast on CPU only pays
on some chips and was not measured faster at equal quality here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def pick_device(requested: str = "auto") -> torch.device:
    """`auto` -> cuda if available else cpu; anything else is passed to `torch.device`."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype to use, or None for plain fp32. `auto` means bf16 on CUDA, fp32 elsewhere."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return None
    raise ValueError(f"precision must be auto, fp32 or bf16, got {precision!r}")


@contextlib.contextmanager
def autocast(device: torch.device, dtype: torch.dtype | None) -> Iterator[None]:
    """`torch.autocast` when a dtype is given, a no-op otherwise."""
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield
