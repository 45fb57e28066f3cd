"""Optional ONNX Runtime forward pass for bulk scoring (`--backend onnx`).

On CPU, ONNX Runtime's fused BERT kernels run the same fp32 weights faster than eager PyTorch,
with scores equal to ~1e-7 (measured in docs/benchmarks.md). Everything else stays the predictor's
(tokenizing, sorting by length, dynamic padding, bi-encoder sentence dedup, thresholds): the torch
encoder inside a loaded `Predictor` is exported once per process and replaced by a module that
calls an ONNX Runtime session, so both backends feed the model exactly the same batches.
Needs the `onnx` and `onnxruntime` packages; nothing is written next to the model.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class OrtEncoder(nn.Module):
    """Stands in for a CrossEncoder/BiEncoder: same call signature, forward pass in ONNX Runtime.

    The predictor L2-normalises bi-encoder outputs only for its own BiEncoder class, so this module
    normalises them itself (normalising twice would change nothing anyway).
    """

    def __init__(self, session: Any, kind: str) -> None:
        super().__init__()
        self.session = session
        self.kind = kind

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        feed = {
            "input_ids": input_ids.numpy(),
            "attention_mask": attention_mask.numpy(),
            "token_type_ids": token_type_ids.numpy(),
        }
        out = torch.from_numpy(np.asarray(self.session.run(None, feed)[0], dtype=np.float32))
        if self.kind == "bi":
            out = nn.functional.normalize(out, dim=-1)
        return out


def export_encoder(model: nn.Module, kind: str, path: Path) -> Path:
    """Export a torch CrossEncoder/BiEncoder with dynamic batch and sequence axes."""
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
    axes["output"] = {0: "batch"}
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about data-dependent branches in BERT
        torch.onnx.export(
            model.eval(),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(path),
            input_names=list(INPUTS),
            output_names=["output"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    return path


def use_onnx(predictor: Any, threads: int) -> Any:
    """Swap the predictor's torch encoder for an ONNX Runtime session; returns the same predictor."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    with tempfile.TemporaryDirectory(prefix="simpair-onnx-") as tmp:
        path = export_encoder(predictor.model, predictor.kind, Path(tmp) / "encoder.onnx")
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    predictor.model = OrtEncoder(session, predictor.kind)
    return predictor
