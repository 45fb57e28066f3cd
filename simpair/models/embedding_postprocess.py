"""Centre bi-encoder embeddings and remove their dominant direction before the cosine.

Why: fine-tuning with a ranking loss (CoSENT) only cares about the order of cosines, and it leaves
every sentence embedding sharing one large common component. On STS-B train sentences the mean of the
L2-normalised embeddings has norm 0.61-0.71 after fine-tuning, against 0.18 for the untouched
backbone: all cosines are squeezed into a narrow band and the differences that carry meaning are a
small part of each vector. Subtracting that mean and projecting out the top principal direction(s),
"all-but-the-top" (Mu & Viswanath, 2018), or whitening (Su et al., 2021) undoes it. The statistics come
from the model's own unlabelled training sentences, never from dev or test labels.

Opt-in (`postprocess:` in a bi-encoder config): on STS-B it helped only the dev genre that training
never saw and cost accuracy on the trained genres, so test fell (docs/training.md, docs/experiments.md).

The transform is linear and fixed after fitting, so it runs inside `BiEncoder.forward`: the torch,
bf16 and ONNX scoring paths all get it without code of their own. Its tensors are non-persistent
buffers (kept out of the state dict: a soup averages weights, then fits its own transform) and are
saved beside the weights as safetensors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

POSTPROCESS_FILE = "embedding_postprocess.safetensors"


class EmbeddingPostprocess(nn.Module):
    """u -> P (u / |u| - mean), P removing the top principal directions of the training embeddings."""

    def __init__(self, mean: torch.Tensor, directions: torch.Tensor) -> None:
        super().__init__()
        if mean.ndim != 1 or directions.ndim != 2 or directions.shape[1] != mean.shape[0]:
            raise ValueError(
                f"mean must be (H,) and directions (d, H); got {tuple(mean.shape)}, {tuple(directions.shape)}"
            )
        self.register_buffer("mean", mean.float(), persistent=False)
        self.register_buffer("directions", directions.float(), persistent=False)

    @property
    def n_directions(self) -> int:
        return int(self.directions.shape[0])

    @classmethod
    def fit(cls, embeddings: np.ndarray, n_directions: int) -> EmbeddingPostprocess:
        """Mean and top principal directions of L2-normalised embeddings (one row per distinct sentence)."""
        x = np.asarray(embeddings, dtype=np.float64)
        if x.ndim != 2 or len(x) <= n_directions:
            raise ValueError(
                f"{n_directions} direction(s) need more than {n_directions} embeddings; got shape {x.shape}"
            )
        x = x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
        mean = x.mean(axis=0)
        if n_directions == 0:
            directions = np.zeros((0, x.shape[1]))
        else:  # imported here: loading a model for scoring (MLflow pyfunc env) needs no scikit-learn
            from sklearn.decomposition import PCA

            directions = PCA(n_components=n_directions, svd_solver="full").fit(x).components_
        return cls(torch.from_numpy(mean), torch.from_numpy(np.ascontiguousarray(directions)))

    def describe(self, fitted_on: list[str], sentences: int) -> dict[str, Any]:
        """The model metadata entry (`simpair.json`, `embedding_postprocess`) for this transform."""
        return {"remove_directions": self.n_directions, "fitted_on": fitted_on, "sentences": sentences}

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        with torch.autocast(embeddings.device.type, enabled=False):  # a few FLOPs; keep them fp32
            x = nn.functional.normalize(embeddings.float(), dim=-1) - self.mean
            return x - (x @ self.directions.T) @ self.directions

    def save(self, directory: Path) -> Path:
        path = Path(directory) / POSTPROCESS_FILE
        tensors = {"mean": self.mean, "directions": self.directions}
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> EmbeddingPostprocess | None:
        """The transform saved in a model directory, or None if it has none (or is not a local path)."""
        path = Path(directory) / POSTPROCESS_FILE
        if not path.is_file():
            return None
        tensors = load_file(str(path))
        return cls(tensors["mean"], tensors["directions"])
