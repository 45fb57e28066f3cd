"""The opt-in int8 forward pass for bulk scoring (`--precision int8`): a quantized ONNX Runtime graph.

Not the default: int8 moves scores (docs/scoring.md has the measured cost), so a model version may
only score in int8 once `int8_guard` has measured its dev metric in int8 against fp32.

The graph quantized is the fp32 graph `onnx_backend` exports and verifies against torch (the
[CLS]-only rewrite where it applies), so both backends share one export. Only MatMul weights are
quantized, one scale per output channel: they hold nearly all the FLOPs, while the embedding tables
(Gather), LayerNorm/Softmax/GELU and the pooler/classifier (Gemm) stay fp32. On a trained MSRP
cross-encoder one scale per channel instead of per matrix halved the labels int8 flips (600 test
pairs: 4.5% -> 1.8%) at the same speed.

Two ways of quantizing, measured on the bundled MiniLM-L6 as a cross-encoder (docs/scoring.md):

- **dynamic** (default): int8 weights, activation ranges computed per batch at run time. Needs no
  calibration data, so every model version can be quantized the same way at load time.
- **static**: activation ranges fixed from calibration pairs (QDQ format). Kept for the benchmark:
  it was slower here (84 vs 94 pairs/s, 1 thread) and flipped more labels of a trained model.

Graphs are built in a temporary folder, never next to the model.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simpair.models import Predictor
from simpair.models.batching import pad_batch
from simpair.runtime.onnx_backend import OrtEncoder, OrtPredictor, export_verified, open_session

MODES = ("dynamic", "static")
DEFAULT_MODE = "dynamic"
QUANTIZED_OPS = ["MatMul"]
CALIBRATION_BATCH = 16
log = logging.getLogger(__name__)


class _Calibration:
    """Feeds calibration pairs to `quantize_static` as the graph's inputs, a batch at a time."""

    def __init__(self, batches: list[dict[str, np.ndarray]]) -> None:
        self._batches: Iterator[dict[str, np.ndarray]] = iter(batches)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)

    def rewind(self) -> None:  # one pass is all MinMax calibration needs
        pass


def calibration_batches(
    predictor: Predictor, text_a: Sequence[str], text_b: Sequence[str], inputs: set[str]
) -> list[dict[str, np.ndarray]]:
    """Calibration pairs tokenized and padded as scoring would feed them (bi-encoders: both sides)."""
    tok = predictor.tokenizer
    max_length = predictor.max_length
    if predictor.kind == "cross":
        enc = tok(list(text_a), list(text_b), truncation=True, max_length=max_length)
    else:
        enc = tok(list(text_a) + list(text_b), truncation=True, max_length=max_length)
    ids, types = enc["input_ids"], enc.get("token_type_ids")
    batches = []
    for start in range(0, len(ids), CALIBRATION_BATCH):
        part_types = types[start : start + CALIBRATION_BATCH] if types is not None else None
        batch = pad_batch(ids[start : start + CALIBRATION_BATCH], tok.pad_token_id or 0, part_types)
        if "token_type_ids" not in batch:
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        batches.append({k: v.numpy() for k, v in batch.items() if k in inputs})
    return batches


def quantize_graph(
    fp32_graph: Path,
    out: Path,
    mode: str = DEFAULT_MODE,
    calibration: list[dict[str, np.ndarray]] | None = None,
) -> Path:
    """Write the int8 version of an exported fp32 graph to `out` (dynamic, or static from calibration)."""
    logging.getLogger().addFilter(_quiet_hint)  # the quantizer logs a pre-processing hint on root
    try:
        return _quantize(fp32_graph, out, mode, calibration)
    finally:
        logging.getLogger().removeFilter(_quiet_hint)


def _quiet_hint(record: logging.LogRecord) -> bool:
    """Drop ORT's pre-processing hint: logged on every call, it would land in every scoring log."""
    return "pre-processing" not in record.getMessage()


def _quantize(
    fp32_graph: Path, out: Path, mode: str, calibration: list[dict[str, np.ndarray]] | None
) -> Path:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    if mode == "dynamic":
        quantize_dynamic(
            fp32_graph, out, op_types_to_quantize=QUANTIZED_OPS, weight_type=QuantType.QInt8,
            per_channel=True,
        )  # fmt: skip
        return out
    if mode != "static":
        raise ValueError(f"int8 mode must be one of {MODES}, got {mode!r}")
    if not calibration:
        raise ValueError("static int8 needs calibration pairs (activation ranges come from them)")
    quantize_static(
        fp32_graph, out, _Calibration(calibration), quant_format=QuantFormat.QDQ,
        op_types_to_quantize=QUANTIZED_OPS, activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8, per_channel=True,
    )  # fmt: skip
    return out


def build_int8_encoder(
    predictor: Predictor,
    threads: int,
    mode: str = DEFAULT_MODE,
    calibration: tuple[Sequence[str], Sequence[str]] | None = None,
) -> OrtEncoder:
    """The predictor's verified fp32 export, quantized to int8, in an ONNX Runtime session.

    `calibration` is (text_a, text_b) pairs, needed by `static` only.
    """
    with tempfile.TemporaryDirectory(prefix="simpair-int8-") as tmp:
        fp32_graph, fp32 = export_verified(predictor, threads, Path(tmp))
        batches = None
        if mode == "static" and calibration is not None:
            batches = calibration_batches(predictor, *calibration, inputs=fp32.inputs)
        graph = quantize_graph(fp32_graph, Path(tmp) / "int8.onnx", mode, batches)
        return OrtEncoder(open_session(graph, threads), predictor.kind, f"{fp32.variant}+int8-{mode}")


class Int8Predictor(OrtPredictor):
    """The ONNX Runtime predictor on a quantized graph: batching and output mapping are OrtPredictor's."""

    precision = "int8"


def use_int8(predictor: Any, threads: int, mode: str = DEFAULT_MODE) -> Any:
    """The int8 forward pass for a predictor; a stacked model gets it in each of its members.

    A cascade gets it in its bi stage only: int8 is there to make the cheap stage cheaper, while the
    cross-encoder, which decides the uncertain pairs, keeps its fp32 ONNX Runtime graph. The parity
    guard measures the cascade as a whole, so the band's decisions are what it judges.
    """
    if predictor.kind == "cascade":
        from simpair.runtime.onnx_backend import use_onnx

        bi, cross = predictor.members
        predictor.members = [use_int8(bi, threads, mode), use_onnx(cross, threads)]
        return predictor
    return predictor.each_member(
        lambda member: Int8Predictor(member, build_int8_encoder(member, threads, mode))
    )
