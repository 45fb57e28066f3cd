"""Turn text pairs into scores with one saved model (cross or bi): the single-model predictor.

Speed matters (nightly bulk scoring), so prediction tokenizes the whole call at once with the fast
tokenizer, sorts pairs by length so each batch pads little, runs under `torch.inference_mode`, and puts
results back in input order (`simpair.models.inference`). Bi-encoders encode each distinct sentence once
per call. What every predictor shares (predict = from_raw(predict_raw), the model's facts) is
`simpair.models.predictor_base`; loading any model kind, stacks included, is
`simpair.runtime.loader.load_predictor`, the only caller of `Predictor.load` above this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.device import autocast_dtype, pick_device
from simpair.models.inference import first_output, forward_sorted, normalized
from simpair.models.io import EncoderModel, load_model
from simpair.models.metadata import ModelMetadata
from simpair.models.predictor_base import BasePredictor, Call, ModelFacts, Texts


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


class Predictor(BasePredictor):
    """A loaded single model (cross or bi) plus what it needs to score pairs (see `Predictor.load`)."""

    def __init__(
        self,
        model: EncoderModel,
        tokenizer: PreTrainedTokenizerBase,
        metadata: ModelMetadata,
        model_dir: Path | None = None,
        device: str = "auto",
        precision: str = "fp32",
    ) -> None:
        self.device = pick_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.meta = metadata
        self.model_dir = model_dir
        self._dtype = autocast_dtype(self.device, precision)

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
        batch_size, progress = call.batch_size, call.progress
        if self.kind == "cross":
            logits = self._cross_logits(text_a, text_b, batch_size, progress)
            if self.meta.symmetric:
                logits = (logits + self._cross_logits(text_b, text_a, batch_size, progress)) / 2
            return logits
        return self._bi_cosines(text_a, text_b, batch_size, progress)

    def embed(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """L2-normalised sentence embeddings (bi-encoders only), in input order."""
        if self.kind != "bi":
            raise TypeError("embed() needs a bi-encoder; this model is a cross-encoder")
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return self._run(enc, batch_size, progress, desc="embed")

    def truncated(self, text_a: Sequence[str], text_b: Sequence[str]) -> np.ndarray:
        """True for pairs whose tokens exceed max_length (their predictions saw a truncated text)."""
        if len(text_a) == 0:
            return np.zeros(0, dtype=bool)
        return self.truncated_from_lengths(self.token_counts(text_a), self.token_counts(text_b))

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Tokens of each text without special tokens: what `truncated_from_lengths` compares."""
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))

    def truncated_from_lengths(self, la: np.ndarray, lb: np.ndarray) -> np.ndarray:
        """The truncation rule on token counts: a cross-encoder reads both texts in one sequence, a
        bi-encoder each alone. Composite models count each distinct sentence once for all members."""
        if self.kind == "cross":
            return (la + lb + self.tokenizer.num_special_tokens_to_add(pair=True)) > self.max_length
        special = self.tokenizer.num_special_tokens_to_add(pair=False)
        return ((la + special) > self.max_length) | ((lb + special) > self.max_length)

    # ---------------------------------------------------------------- internals
    def _cross_logits(self, a: list[str], b: list[str], batch_size: int, progress: bool) -> np.ndarray:
        enc = self.tokenizer(a, b, truncation=True, max_length=self.max_length)
        return self._run(enc, batch_size, progress, desc="predict")

    def _bi_cosines(self, a: list[str], b: list[str], batch_size: int, progress: bool) -> np.ndarray:
        index: dict[str, int] = {}
        for text in a + b:
            index.setdefault(text, len(index))
        emb = self.embed(list(index), batch_size=batch_size, progress=progress)
        ia = np.fromiter((index[t] for t in a), dtype=np.int64, count=len(a))
        ib = np.fromiter((index[t] for t in b), dtype=np.int64, count=len(b))
        return np.einsum("ij,ij->i", emb[ia], emb[ib]).astype(np.float32)

    def _run(self, enc: Any, batch_size: int, progress: bool, desc: str) -> np.ndarray:
        """One tokenized call through the model (scoring backends override this batch loop)."""
        return forward_sorted(
            self.model,
            [(enc["input_ids"], enc.get("token_type_ids"))],
            self.tokenizer.pad_token_id or 0,
            self.device,
            self._dtype,
            batch_size=batch_size,
            combine=normalized if isinstance(self.model, BiEncoder) else first_output,
            progress=progress,
            desc=desc,
        )

    @classmethod
    def load(cls, model_dir: str | Path, device: str = "auto", precision: str = "fp32") -> Predictor:
        """Load a single-model directory (cross or bi) written by training, `save_tiny_model` or a soup.

        `simpair.runtime.loader.load_predictor` is the door for every model kind, stacks included.
        """
        model_dir = Path(model_dir)
        kind = ModelMetadata.read(model_dir).kind
        if kind in ("stacked", "cascade"):
            raise ValueError(f"{model_dir} is a {kind} model: use simpair.runtime.loader.load_predictor")
        model, tokenizer, metadata = load_model(model_dir)
        return cls(model, tokenizer, metadata, model_dir=model_dir, device=device, precision=precision)


__all__ = ["BiEncoder", "CrossEncoder", "ModelFacts", "Predictor"]
