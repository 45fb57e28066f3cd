"""The bf16 forward pass under torch's bf16 autocast: CUDA, `--backend torch`, and CPUs without OpenVINO.

On CPU with `--backend auto`, bf16 runs on OpenVINO instead (`openvino_backend`, faster here).

Scores move by ~1e-3 (docs/scoring.md has the measured cost), so `--precision auto` picks bf16 only
when the model's precision verdict accepts it. Only used where bf16 is native
(`simpair.models.device.native_bf16`).

The arithmetic is the predictor's own bf16 autocast (linear layers and attention in bf16, outputs
cast back to fp32 before sigmoid / cosine / calibration). Two things around it are for speed,
measured on 1 thread of this AVX512-BF16 CPU with the MiniLM-L6 cross-encoder (docs/experiments.md):

- **Linear weights stored in bf16 once**: autocast casts fp32 weights to bf16 inside every context
  (its cache lives only as long as the context), ~9% of the time in a profile with a context per
  batch. Autocast rounds them to bf16 the same way, so the scores are bit-identical to the plain
  predictor's bf16 autocast with the same batches (tested); one context per call on top.
- **Token-budget batches** on CPU (the same `budget` batches as the ONNX backend): ~512-token batches
  keep activations in cache. On CUDA, batches stay `batch_size` pairs (a GPU wants big batches).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch
from torch import nn

from simpair.models import BiEncoder, Predictor
from simpair.models.device import autocast
from simpair.runtime.budget import MAX_BATCH_TOKENS


class Bf16Predictor(Predictor):
    """The predictor's bf16 autocast forward pass, with one autocast context and token-budget batches.

    Tokenizing ahead of the model, length sorting, bi-encoder sentence dedup, thresholds and output
    mapping are the parent's; only the forward pass of a padded batch (`_forward`) and the context
    around a call's batches (`_call_context`) differ.
    """

    def __init__(self, base: Predictor, max_batch_tokens: int | None = MAX_BATCH_TOKENS) -> None:
        super().__init__(
            base.model, base.tokenizer, base.meta, model_dir=base.model_dir, device=str(base.device),
            precision="bf16",
        )  # fmt: skip
        if self._dtype != torch.bfloat16:  # `use_bf16` is only called where bf16 is native
            raise RuntimeError(f"no native bf16 on {self.device}; refusing to run emulated bf16")
        for module in self.model.modules():  # what autocast would cast on every call, cast once
            if isinstance(module, nn.Linear):
                module.to(torch.bfloat16)
        # GPUs want big batches: the token budget is a CPU cache effect
        self.max_batch_tokens = max_batch_tokens if self.device.type == "cpu" else None
        self.block_rows = base.block_rows

    def _call_context(self) -> contextlib.AbstractContextManager[Any]:
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode())
        stack.enter_context(autocast(self.device, self._dtype))  # one context per call, not per batch
        return stack

    def _forward(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        out = self.model(**batch).float()  # back to fp32 before cosine / sigmoid
        if isinstance(self.model, BiEncoder):
            out = torch.nn.functional.normalize(out, dim=-1)
        return out.cpu().numpy()


def use_bf16(predictor: Any) -> Any:
    """The bf16 forward pass for a predictor; a stacked model or a cascade gets it in each of its members."""
    return predictor.each_member(Bf16Predictor)
