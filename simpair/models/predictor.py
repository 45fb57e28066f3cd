"""Turn text pairs into scores with one saved model (cross or bi): the single-model predictor.

Speed matters (nightly bulk scoring), so prediction tokenizes through the encoder pretokenize uses
(`simpair.pair_tokens.encode`: distinct words through the Rust backend into flat numpy arrays), in a
producer thread a few blocks ahead of the model (`simpair.models.token_stream`), sorts each block by
length so each batch pads little, runs under `torch.inference_mode`, and puts results back in input
order. A symmetric cross-encoder's two orders come from one tokenization and share their batches.
Bi-encoders encode each distinct sentence once per call. What every predictor shares (predict =
from_raw(predict_raw), the model's facts) is `simpair.models.predictor_base`; loading any model
kind, stacks included, is `simpair.runtime.loader.load_predictor`, the only caller of `Predictor.load`
above this package. A scoring backend (`simpair.runtime`) changes only `_forward` (one padded batch
to outputs), `_call_context` and `max_batch_tokens`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from simpair.models.device import autocast, autocast_dtype, pick_device
from simpair.models.metadata import ModelMetadata
from simpair.models.predictor_base import BasePredictor, Call, ModelFacts, Texts
from simpair.models.token_stream import EncodeRows, StreamStats, run_ahead
from simpair.pair_tokens.encode import BatchEncoder, encoder_for

if TYPE_CHECKING:
    from simpair.models.io import EncoderModel


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


class Predictor(BasePredictor):
    """A loaded single model (cross or bi) plus what it needs to score pairs (see `Predictor.load`)."""

    # a batch's token budget, padding included (CPU scoring backends); None: `batch_size` rows
    max_batch_tokens: int | None = None
    # rows tokenized together ahead of the model (`token_stream.run_ahead`); None: its default
    block_rows: int | None = None
    # batches run at once (`token_stream.run_ahead`): a backend whose forward pass is thread-safe and
    # single-threaded per call (ONNX Runtime) runs one per thread; torch uses its own threads instead
    lanes: int = 1

    def __init__(
        self,
        model: EncoderModel | torch.nn.Module | Callable[[], EncoderModel],
        tokenizer: PreTrainedTokenizerBase,
        metadata: ModelMetadata,
        model_dir: Path | None = None,
        device: str = "auto",
        precision: str = "fp32",
    ) -> None:
        self.device = pick_device(device)
        self._model: torch.nn.Module | None = None
        self._build: Callable[[], EncoderModel] | None = None
        self._model_lock = threading.Lock()
        if isinstance(model, torch.nn.Module):
            self.model = model
        else:
            self._build = model
        self.tokenizer = tokenizer
        self.meta = metadata
        self.model_dir = model_dir
        self._dtype = autocast_dtype(self.device, precision)
        self._encoder: BatchEncoder | None = None
        self._encoder_lock = threading.Lock()
        self.token_stats = StreamStats()  # what tokenizing ahead did, summed over calls

    @property
    def encoder(self) -> BatchEncoder:
        """The pretokenize encoder for this model's tokenizer, max length and form (built on first use:
        it checks itself against the tokenizer's own call once)."""
        with self._encoder_lock:
            if self._encoder is None:
                form = "cross" if self.kind == "cross" else "bi"
                self._encoder = encoder_for(self.tokenizer, self.max_length, form)
            return self._encoder

    @property
    def model(self) -> Any:
        """The torch model, built on first use when the predictor was given a builder (`load(lazy=True)`).

        A scoring backend whose compiled graph is in the graph cache never asks for it, so a fresh
        process scores without building the torch model or importing its modeling code.
        """
        if self._model is None:
            with self._model_lock:
                if self._model is None:
                    assert self._build is not None
                    # first read may come inside a scoring call's inference mode: build a normal model
                    with torch.inference_mode(False):
                        self._model = self._build().to(self.device).eval()
        return self._model

    @model.setter
    def model(self, value: torch.nn.Module) -> None:
        self._model = value.to(self.device).eval()

    # ---------------------------------------------------------------- public API
    def from_raw(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        """Map raw outputs (cross: logits, bi: cosines) to the public score/probability/label dict."""
        if self.kind == "cross":
            probability = _sigmoid(raw)
        elif self.meta.calibration is not None:
            cal = self.meta.calibration
            probability = _sigmoid(cal.a * raw + cal.b)
        else:
            probability = np.clip(raw, 0.0, 1.0).astype(np.float32)
        return self.scores(probability)

    def _raw(self, text_a: Texts, text_b: Texts, call: Call) -> np.ndarray:
        """Cross-encoders: logits (averaged over both orders if the model is symmetric). Bi: cosines."""
        if self.kind == "cross":
            orders = 2 if self.meta.symmetric else 1

            def encode(lo: int, hi: int) -> list[Any]:
                return self.encoder.pairs(text_a[lo:hi], text_b[lo:hi], orders)

            logits = self._stream(encode, len(text_a), call.batch_size, call.progress, "predict")
            return logits[0] if orders == 1 else (logits[0] + logits[1]) / 2
        return self._bi_cosines(text_a, text_b, call.batch_size, call.progress)

    def embed(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """L2-normalised sentence embeddings (bi-encoders only), in input order."""
        if self.kind != "bi":
            raise TypeError("embed() needs a bi-encoder; this model is a cross-encoder")
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.float32)
        return self._stream(
            lambda lo, hi: [self.encoder.texts(texts[lo:hi])], len(texts), batch_size, progress, "embed"
        )[0]

    def truncated(self, text_a: Sequence[str], text_b: Sequence[str]) -> np.ndarray:
        """True for pairs whose tokens exceed max_length (their predictions saw a truncated text)."""
        if len(text_a) == 0:
            return np.zeros(0, dtype=bool)
        return self.truncated_from_lengths(self.token_counts(text_a), self.token_counts(text_b))

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Tokens of each text without special tokens: what `truncated_from_lengths` compares."""
        return self.encoder.lengths(list(texts)).astype(np.int64)

    def truncated_from_lengths(self, la: np.ndarray, lb: np.ndarray) -> np.ndarray:
        """The truncation rule on token counts: a cross-encoder reads both texts in one sequence, a
        bi-encoder each alone. Composite models count each distinct sentence once for all members."""
        if self.kind == "cross":
            return (la + lb + self.tokenizer.num_special_tokens_to_add(pair=True)) > self.max_length
        special = self.tokenizer.num_special_tokens_to_add(pair=False)
        return ((la + special) > self.max_length) | ((lb + special) > self.max_length)

    # ---------------------------------------------------------------- internals
    def _bi_cosines(self, a: list[str], b: list[str], batch_size: int, progress: bool) -> np.ndarray:
        index: dict[str, int] = {}
        for text in a + b:
            index.setdefault(text, len(index))
        emb = self.embed(list(index), batch_size=batch_size, progress=progress)
        ia = np.fromiter((index[t] for t in a), dtype=np.int64, count=len(a))
        ib = np.fromiter((index[t] for t in b), dtype=np.int64, count=len(b))
        return np.einsum("ij,ij->i", emb[ia], emb[ib]).astype(np.float32)

    def _stream(self, encode: EncodeRows, n: int, batch_size: int, progress: bool, desc: str) -> np.ndarray:
        """The model over rows tokenized ahead (`token_stream.run_ahead`): (inputs, n, ...) float32."""
        with self._call_context():
            return run_ahead(
                encode,
                n,
                self._forward,
                batch_size=batch_size,
                pad_id=self.tokenizer.pad_token_id or 0,
                max_tokens=self.max_batch_tokens,
                block_rows=self.block_rows,
                stats=self.token_stats,
                lanes=self.lanes,
                pin=self.device.type == "cuda",
                progress=progress,
                desc=desc,
            )

    def _call_context(self) -> contextlib.AbstractContextManager[Any]:
        """Around one call's batch loop (a backend may add its autocast once per call)."""
        return torch.inference_mode()

    def _forward(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        """One padded batch through the model: float32 outputs (bi-encoders: L2-normalised)."""
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        with autocast(self.device, self._dtype):
            out = self.model(**batch)
        out = out.float()
        from simpair.models.bi_encoder import BiEncoder  # loaded with the model already

        if isinstance(self.model, BiEncoder):
            out = torch.nn.functional.normalize(out, dim=-1)
        return out.cpu().numpy()

    @classmethod
    def load(
        cls, model_dir: str | Path, device: str = "auto", precision: str = "fp32", lazy: bool = False
    ) -> Predictor:
        """Load a single-model directory (cross or bi) written by training, `save_tiny_model` or a soup.

        `lazy`: build the torch model only when `model` is first read (a scoring backend whose graph
        is cached never reads it). `simpair.runtime.loader.load_predictor` is the door for every model
        kind, stacks included.
        """
        from simpair.models.tokenizer import load_tokenizer

        model_dir = Path(model_dir)
        metadata = ModelMetadata.read(model_dir)
        if metadata.kind in ("stacked", "cascade"):
            raise ValueError(
                f"{model_dir} is a {metadata.kind} model: use simpair.runtime.loader.load_predictor"
            )

        def build() -> EncoderModel:
            from simpair.models.io import build_model  # the modeling code: only when the model is built

            return build_model(metadata.kind, model_dir, metadata.cross_head, metadata.pooling)

        model = build if lazy else build()
        return cls(
            model,
            load_tokenizer(model_dir),
            metadata,
            model_dir=model_dir,
            device=device,
            precision=precision,
        )


__all__ = ["ModelFacts", "Predictor"]
