"""Device and precision choice shared by training and prediction.

Devices: `auto` is CUDA when a GPU is present, else CPU. Training's `precision: auto` trains under
bf16 autocast on CUDA (Ampere and later run bf16 matmuls at full rate, and bf16 needs no loss scaling,
unlike fp16) and in fp32 on CPU, because bf16 only pays on chips with native bf16 instructions
(AVX512-BF16, AMX). Training configs that ask for `bf16` get it where it is native: on this machine's
AVX512-BF16 CPU it trained 1.5x faster at equal dev/test quality (docs/experiments.md); elsewhere they
fall back to fp32 with a warning instead of running slow emulated bf16. Prediction (evaluation, the
gate, the pyfunc, dev metrics during training) runs in fp32 unless asked: scores must match fp32 to
1e-4, and only bulk scoring opts in to bf16.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator

import torch

from simpair.models.cpu_flags import cpu_flag_set


def pick_device(requested: str = "auto") -> torch.device:
    """`auto` -> cuda if available else cpu; anything else is passed to `torch.device`.

    Asking for CUDA where there is none fails here, with the reason, not at the first tensor.
    """
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device {requested!r} asked, but torch sees no CUDA device here (use auto or cpu)"
        )
    return device


def _cpu_native_bf16() -> bool:
    """bf16 in hardware: AVX512-BF16 or AMX. oneDNN also reports bf16 "supported" on any AVX-512 CPU,
    where it is emulated and slower than fp32 (an Intel Xeon with AVX-512 but no AVX512-BF16, 2026-11-29:
    OpenVINO bf16 scored about 3 pairs/s against about 40 in fp32), so the flags decide where readable."""
    flags = cpu_flag_set()
    if flags is not None:
        return bool({"avx512_bf16", "amx_bf16"} & flags)
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def native_bf16(device: torch.device) -> bool:
    """Whether bf16 matmuls run natively (fast) on `device`."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        return _cpu_native_bf16()
    return False


def training_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype of training steps: `auto` is bf16 wherever bf16 is native, CPUs included.

    Prediction keeps `autocast_dtype`'s rule (bf16 by default only on CUDA): a CPU run's scores and
    metrics stay fp32 unless the precision ladder accepts bf16. Training steps are different: their
    rounding is one more source of noise among many (seeds, order), and on a 2-core AMD EPYC with
    AVX512-BF16 a MiniLM cross-encoder step ran 1.5-1.6x faster under bf16 autocast (2026-11-27,
    docs/experiments.md), as bf16 training already is the default on CUDA.
    """
    if precision == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    return autocast_dtype(device, precision)


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype to use, or None for plain fp32. `auto` means bf16 on CUDA, fp32 elsewhere."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        if native_bf16(device):
            return torch.bfloat16
        warnings.warn(f"precision bf16: {device} has no native bf16 support, using fp32", stacklevel=2)
        return None
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


# the CPU flags a precision verdict's timings and kernels depend on: bf16 (AVX512-BF16, AMX) and int8
# (AVX512-VNNI, AMX-INT8) instructions, and the AVX2 baseline every ONNX Runtime / OpenVINO kernel assumes
VERDICT_CPU_FLAGS = (
    "avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"
)  # fmt: skip
VERDICT_RUNTIMES = ("torch", "onnxruntime", "openvino")


@functools.cache
def _cpu_flags() -> str:
    """The `VERDICT_CPU_FLAGS` this CPU has, space-separated ("" where /proc/cpuinfo cannot be read)."""
    have = cpu_flag_set() or set()
    return " ".join(f for f in VERDICT_CPU_FLAGS if f in have)


def host_facts(device: torch.device) -> dict[str, str]:
    """The facts a precision verdict holds for: CPU flags, runtime versions, the int8 recipe, the GPU.

    A verdict measured on another CPU or runtime version may not hold here (another bf16 kernel, an
    int8 path without VNNI, a different speedup), so it records these and scoring compares them
    (`simpair.runtime.resolve`). Read from package metadata, not by importing the runtimes: a
    scoring run checks them before its first batch and must stay cheap.
    """
    from importlib import metadata

    from simpair.models.int8_check import int8_graph
    from simpair.models.precision_verdict import INT8_GRAPH_FACT

    # a hypervisor may hide a flag from /proc/cpuinfo that oneDNN still finds and uses (this 2-core
    # AMD EPYC shows no avx512_bf16 there, yet runs bf16 natively), so oneDNN's own answer is kept too
    facts = {"cpu_flags": _cpu_flags(), "native_bf16": "yes" if native_bf16(device) else "no",
             INT8_GRAPH_FACT: int8_graph()}  # fmt: skip
    for name in VERDICT_RUNTIMES:
        try:
            facts[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            facts[name] = "absent"
    if device.type == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(device)
    return facts
