"""The bf16 forward pass on CPUs with native bf16: OpenVINO running the graph `onnx_backend` exports.

Why OpenVINO: ONNX Runtime's CPU provider has no fast bf16 kernels, and torch's bf16 autocast pays
per-op overhead. OpenVINO is Intel's CPU runtime, and sentence-transformers ships it as its fast
backend (`backend="openvino"`, bf16 by default on AVX512-BF16 / AMX cores). Here it compiles the
same fp32 graph the ONNX backend exports and verifies against torch (the [CLS]-only last layer for
BERT cross-encoders) with `INFERENCE_PRECISION_HINT: bf16`, so matmuls run in bf16 and the outputs
come back in fp32. Measured on 2 cores of an AMD EPYC with AVX512-BF16 (MSRP cross-encoder, 1,000
MSRP test pairs, 512-token batches, 2026-11-27): 250-260 pairs/s against 199 for torch bf16 autocast
and 176 for ONNX Runtime fp32, scores within 0.05 of fp32 (as torch bf16), docs/experiments.md.

Only used where bf16 is native (elsewhere OpenVINO would emulate it) and only when the `openvino`
package is importable; otherwise bf16 runs through torch autocast (`bf16_backend`). Which runtime
measured a model's bf16 rung is recorded in its precision verdict, and `--precision auto` runs that
runtime again, so a model scores the way it was judged.

The exported graph comes from the graph cache (`graph_cache`) after the first load, and OpenVINO keeps
its compiled form there too (`CACHE_DIR`), so a later process neither exports nor compiles.
"""

from __future__ import annotations

import importlib.util
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from simpair.models import Predictor
from simpair.runtime import graph_cache
from simpair.runtime.onnx_backend import OrtEncoder, OrtPredictor, cache_entry, fp32_graph

OPENVINO, TORCH = "openvino", "torch"  # the two bf16 runtimes, as recorded in a precision verdict
log = logging.getLogger(__name__)


def available() -> bool:
    """Whether the `openvino` package can be imported (a dependency; a slim install may lack it)."""
    return importlib.util.find_spec("openvino") is not None


class OvEncoder(OrtEncoder):
    """`OrtEncoder`'s contract (inputs, bi-encoder normalising), forward pass in OpenVINO."""

    def __init__(self, compiled: Any, kind: str, variant: str) -> None:
        nn.Module.__init__(self)
        self.session = compiled
        self.kind = kind
        self.inputs = {port.get_any_name() for port in compiled.inputs}
        self.variant = variant
        self.lanes = 1  # one compiled model, its own threads: batches one at a time

    def infer(self, feed: dict[str, np.ndarray]) -> Any:
        return self.session(feed)[0]


class OvPredictor(OrtPredictor):
    """Token-budget batches and output mapping are OrtPredictor's; the forward pass is OpenVINO's."""

    precision = "bf16"


def compile_graph(path: Path, threads: int, precision: str = "bf16", cache_dir: Path | None = None) -> Any:
    """An OpenVINO CPU model for an exported graph: `threads` threads, latency mode, `precision` math.

    With `cache_dir`, OpenVINO stores the compiled model there and a later compile of the same graph
    and settings imports it instead; if compiling with the cache fails, it compiles without it.
    """
    import openvino as ov

    core = ov.Core()
    config: dict[str, Any] = {
        "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "LATENCY",  # one stream: this process's chunks already arrive one at a time
        "INFERENCE_PRECISION_HINT": precision,
    }
    if cache_dir is not None:
        try:  # from the path, so a cached blob is imported without reading the ONNX graph at all
            return core.compile_model(str(path), "CPU", {**config, "CACHE_DIR": str(cache_dir)})
        except Exception as exc:
            log.warning("OpenVINO cache %s unusable (%s); compiling without it", cache_dir, exc)
    return core.compile_model(core.read_model(str(path)), "CPU", config)


def build_encoder(predictor: Predictor, threads: int, precision: str = "bf16") -> OvEncoder:
    """The verified fp32 graph (as the ONNX backend has it, from the graph cache when there), compiled
    in OpenVINO (from its cache when there)."""
    cache = cache_entry(predictor)
    with tempfile.TemporaryDirectory(prefix="simpair-openvino-") as tmp:
        path, variant = fp32_graph(predictor, threads, Path(tmp))
        # reads the file now; the folder may go
        compiled = compile_graph(path, threads, precision, graph_cache.openvino_dir(cache))
    return OvEncoder(compiled, predictor.kind, f"{variant}+openvino-{precision}")


def use_openvino(predictor: Any, threads: int, precision: str = "bf16") -> Any:
    """The OpenVINO forward pass for a predictor; a stacked model or a cascade gets it in each member.

    `precision` "f32" exists for tests on CPUs without native bf16 (the same code path, exact math).
    """

    def wrap(member: Predictor) -> OvPredictor:
        wrapped = OvPredictor(member, build_encoder(member, threads, precision))
        if precision != "bf16":
            wrapped.precision = "fp32"
        return wrapped

    return predictor.each_member(wrap)
