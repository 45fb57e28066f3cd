"""The opt-in int8 forward pass for bulk scoring (`--precision int8`): a quantized ONNX Runtime graph.

Not the default: int8 moves scores (docs/scoring.md has the measured cost), so a model version may
only score in int8 once `int8_guard` has measured its dev metric in int8 against fp32.

The graph quantized is the fp32 graph `onnx_backend` exports and verifies against torch (the
[CLS]-only rewrite where it applies), so both backends share one export. Only MatMul weights are
quantized, one scale per output channel: they hold nearly all the FLOPs, while the embedding tables
(Gather), LayerNorm/Softmax/GELU and the pooler/classifier (Gemm) stay fp32. On a trained MSRP
cross-encoder one scale per channel instead of per matrix halved the labels int8 flips (600 test
pairs: 4.5% -> 1.8%) at the same speed.

Three ways of quantizing the activations, measured on the bundled MiniLM-L6 (docs/scoring.md):

- **per-row** (default): each token's row of a MatMul's input gets its own scale, computed at run
  time from that row alone (symmetric, so one zero point of 128 serves every row and ONNX Runtime's
  fast uint8 x int8 kernel applies). A pair's score then depends on nothing but the pair: the same
  600 pairs scored at batch sizes 1, 8 and 64, shuffled or not, give bit-identical scores, where
  `dynamic` moved them by up to 0.0026 (the backbone as a cross-encoder; the STS champion moved by
  0.030). With the fused kernel (`quantize_per_row`) it runs about as fast as `dynamic` and is
  closer to fp32.
- **dynamic**: ONNX Runtime's `quantize_dynamic`, one activation scale per batch tensor, so a pair's
  score depends on its batch-mates. Kept for the benchmark; the precision ladder refuses it.
- **static**: activation ranges fixed from calibration pairs (QDQ format). Kept for the benchmark:
  it was slower here (84 vs 94 pairs/s, 1 thread) and flipped more labels of a trained model.

Graphs are built in a temporary folder, never next to the model; the per-row and dynamic graphs
(and ONNX Runtime's optimized form of them) are then kept in the graph cache (`graph_cache`), so a
later process quantizes nothing. Static graphs depend on their calibration pairs and are not kept.
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
from simpair.models.int8_check import int8_graph, weight_levels
from simpair.runtime import graph_cache
from simpair.runtime.onnx_backend import (
    OrtEncoder,
    OrtPredictor,
    cache_entry,
    cached_session,
    export_verified,
    fp32_graph,
    open_session,
)

MODES = ("per-row", "dynamic", "static")
DEFAULT_MODE = "per-row"
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

    if mode == "per-row":
        return quantize_per_row(fp32_graph, out, weight_levels(int8_graph()))
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


# a row's int8 values are round(x / scale) + 128 in 1..255, scale = max|x| / 127 over the row alone
ROW_ZERO_POINT = 128


def quantize_per_row(fp32_graph: Path, out: Path, weight_max: int = 127) -> Path:
    """Write the per-row int8 version of `fp32_graph` to `out`: batch-invariant by construction.

    Every MatMul whose second input is a 2-D float weight becomes: its input flattened to [rows, K];
    each row's scale max|row| / 127 (ReduceMin/ReduceMax over that row only); QuantizeLinear along
    axis 0 with the fixed zero point 128; the integer product with the weight quantized per output
    column (symmetric int8), cast to float and times the column scales in one kernel (ONNX Runtime's
    `MatMulIntegerToFloat`), then times the row's scale, and reshaped back. ONNX Runtime's integer
    kernels accept only one zero point and one scale for A, which is why the rows are symmetric and
    their scales multiply afterwards. Integer products are exact, so a row's result never depends on
    how many rows share the tensor. The fused kernel saves a cast and a multiply over every output:
    on MiniLM-L6 batches of 64 pairs it ran 1.2x faster than MatMulInteger + Cast + two Muls
    (1 thread, 2026-11-29), close to ONNX Runtime's own dynamic int8, which is not batch-invariant.
    Weights span +-`weight_max`: 127, or 63 on x86 CPUs without VNNI, whose kernel would otherwise
    clip sums of two products at 16 bits (`simpair.models.int8_check.int8_graph`).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(fp32_graph))
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    added: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        added.append(numpy_helper.from_array(value, name))
        return name

    zero = const("rowq_zero", np.array(0.0, np.float32))
    shift = const("rowq_shift", np.array(float(ROW_ZERO_POINT), np.float32))
    levels = const("rowq_levels", np.array(127.0, np.float32))
    tiny = const("rowq_tiny", np.array(1e-12, np.float32))  # an all-zero row: any scale will do
    one = const("rowq_one", np.array(1.0, np.float32))
    a_zero = const("rowq_a_zero", np.array(ROW_ZERO_POINT, np.uint8))
    last = const("rowq_last", np.array([-1], np.int64))
    first = const("rowq_first", np.array([0], np.int64))
    nodes: list[Any] = []
    for i, node in enumerate(graph.node):
        w = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if w is None or len(w.dims) != 2 or w.data_type != TensorProto.FLOAT:
            nodes.append(node)
            continue
        weight = numpy_helper.to_array(w).astype(np.float32)
        k, n = weight.shape
        w_scale = np.maximum(np.abs(weight).max(axis=0), 1e-12) / float(weight_max)
        w_q = np.clip(np.round(weight / w_scale), -weight_max, weight_max).astype(np.int8)
        p = f"rowq{i}_"
        x, y = node.input[0], node.output[0]
        const(p + "w", w_q)
        const(p + "w_scale", w_scale.astype(np.float32))
        const(p + "rows_k", np.array([-1, k], np.int64))
        const(p + "n", np.array([n], np.int64))
        make = helper.make_node
        nodes += [
            make("Shape", [x], [p + "shape"]),
            make("Reshape", [x, p + "rows_k"], [p + "x"]),
            make("ReduceMin", [p + "x"], [p + "min"], axes=[1], keepdims=0),
            make("ReduceMax", [p + "x"], [p + "max"], axes=[1], keepdims=0),
            make("Neg", [p + "min"], [p + "neg_min"]),
            make("Max", [p + "max", p + "neg_min"], [p + "absmax"]),
            make("Div", [p + "absmax", levels], [p + "scale0"]),
            make("Max", [p + "scale0", tiny], [p + "scale"]),
            make("Mul", [p + "scale", zero], [p + "zp0"]),  # QuantizeLinear wants one per row
            make("Add", [p + "zp0", shift], [p + "zp1"]),
            make("Cast", [p + "zp1"], [p + "zp"], to=TensorProto.UINT8),
            make("QuantizeLinear", [p + "x", p + "scale", p + "zp"], [p + "xq"], axis=0),
            # the integer product, cast and times the column scales in one kernel (a_scale 1: the
            # row scales, which the kernel cannot take, come after)
            make(
                "MatMulIntegerToFloat",
                [p + "xq", p + "w", one, p + "w_scale", a_zero],
                [p + "y_cols"],
                domain="com.microsoft",
            ),
            make("Unsqueeze", [p + "scale", last], [p + "row_scale"]),
            make("Mul", [p + "y_cols", p + "row_scale"], [p + "y"]),
            make("Slice", [p + "shape", first, last], [p + "lead"]),
            make("Concat", [p + "lead", p + "n"], [p + "out_shape"], axis=0),
            make("Reshape", [p + "y", p + "out_shape"], [y]),
        ]
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    used = {name for node in graph.node for name in node.input}
    kept = [init for init in [*graph.initializer, *added] if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.save(model, str(out))
    return out


def build_int8_encoder(
    predictor: Predictor,
    threads: int,
    mode: str = DEFAULT_MODE,
    calibration: tuple[Sequence[str], Sequence[str]] | None = None,
) -> OrtEncoder:
    """The predictor's verified fp32 export, quantized to int8, in an ONNX Runtime session.

    `calibration` is (text_a, text_b) pairs, needed by `static` only. Per-row and dynamic graphs come
    from the graph cache when a previous process built them.
    """
    cache = cache_entry(predictor) if mode != "static" else None
    name = graph_name(mode)
    session = cached_session(cache, name)
    if session is not None:
        return OrtEncoder(session[0], predictor.kind, session[1], threads)
    hit = graph_cache.read(cache, f"{name}.onnx")
    if hit is not None and hit[1].get("variant"):
        variant = str(hit[1]["variant"])
        return OrtEncoder(open_session(hit[0], cache, name, variant), predictor.kind, variant, threads)
    with tempfile.TemporaryDirectory(prefix="simpair-int8-") as tmp:
        if mode == "static":
            fp32_path, fp32 = export_verified(predictor, threads, Path(tmp))
            batches = None
            if calibration is not None:
                batches = calibration_batches(predictor, *calibration, inputs=fp32.inputs)
            fp32_variant = fp32.variant
        else:
            fp32_path, fp32_variant = fp32_graph(predictor, threads, Path(tmp))
            batches = None
        graph = quantize_graph(fp32_path, Path(tmp) / "int8.onnx", mode, batches)
        variant = f"{fp32_variant}+int8-{mode}"
        cached = graph_cache.write(cache, f"{name}.onnx", graph, {"variant": variant})
        return OrtEncoder(
            open_session(cached or graph, cache, name, variant), predictor.kind, variant, threads
        )


def graph_name(mode: str) -> str:
    """The graph cache's name for an int8 mode: the per-row graph's names its weight width where it is
    7 bits (`int8_graph`), so a recipe never loads the other's graph."""
    if mode == "per-row" and weight_levels(int8_graph()) != 127:
        return "int8-per-row-7bit"
    return f"int8-{mode}"


class Int8Predictor(OrtPredictor):
    """The ONNX Runtime predictor on a quantized graph: batching and output mapping are OrtPredictor's."""

    precision = "int8"


def use_int8(predictor: Any, threads: int, mode: str | None = None) -> Any:
    """The int8 forward pass for a predictor; a stacked model gets it in each of its members.

    A cascade gets it in its bi stage only: int8 is there to make the cheap stage cheaper, while the
    cross-encoder, which decides the uncertain pairs, keeps its fp32 ONNX Runtime graph. The parity
    guard measures the cascade as a whole, so the band's decisions are what it judges. `mode` is
    `DEFAULT_MODE` (read at call time) unless given.
    """
    mode = mode or DEFAULT_MODE
    if predictor.kind == "cascade":
        from simpair.runtime.onnx_backend import use_onnx

        bi, cross = predictor.members
        predictor.members = [use_int8(bi, threads, mode), use_onnx(cross, threads)]
        return predictor
    return predictor.each_member(
        lambda member: Int8Predictor(member, build_int8_encoder(member, threads, mode))
    )
