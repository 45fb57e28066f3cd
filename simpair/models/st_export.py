"""Write sentence-transformers' module files beside a saved bi-encoder: `SentenceTransformer(dir)` loads it.

Why: users and downstream tools (semantic search, clustering, vector databases) load embedding models
with `sentence_transformers.SentenceTransformer`. A simpair bi-encoder directory already holds
transformers' weights, config and tokenizer at its root; four small JSON files tell
sentence-transformers how to pool: `Transformer` (the root) -> mean `Pooling` -> `Normalize`, exactly
what `BiEncoder.forward` + `Predictor.embed` compute. The embedding post-processing
(`simpair.models.embedding_postprocess`: u -> P (u/|u| - mean)) is affine after the first
normalisation, so it is one standard `Dense` module (weight P, bias -P mean, identity activation)
followed by a second `Normalize`: no custom code, and the embeddings stay equal (tests check < 1e-5).

The files are written by hand (plain JSON + safetensors), in the format every sentence-transformers
release since 2.0 reads, so saving needs no sentence-transformers install.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from simpair.models.embedding_postprocess import EmbeddingPostprocess

ST_MODULES_FILE = "modules.json"
IDENTITY = "torch.nn.modules.linear.Identity"


def _write_json(path: Path, data: dict[str, Any] | list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _pooling_config(hidden_size: int, pooling: str = "mean") -> dict[str, Any]:
    return {
        "word_embedding_dimension": hidden_size,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }


def _write_post_dense(post: EmbeddingPostprocess, directory: Path, hidden_size: int) -> None:
    """The post-processing as `Dense`: P (x - mean) = x P^T + (-P mean), P symmetric (I - D^T D)."""
    directions = post.directions.detach().cpu().double()
    mean = post.mean.detach().cpu().double()
    projection = torch.eye(hidden_size, dtype=torch.float64) - directions.T @ directions
    bias = -(projection @ mean)
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "in_features": hidden_size,
        "out_features": hidden_size,
        "bias": True,
        "activation_function": IDENTITY,
    }
    _write_json(directory / "config.json", config)
    tensors = {"linear.weight": projection.float().contiguous(), "linear.bias": bias.float().contiguous()}
    save_file(tensors, str(directory / "model.safetensors"))


def write_sentence_transformers_files(
    directory: Path,
    hidden_size: int,
    max_length: int,
    post: EmbeddingPostprocess | None = None,
    pooling: str = "mean",
) -> list[str]:
    """Write the module files into a bi-encoder directory; returns the module types, in order."""
    directory = Path(directory)
    modules: list[tuple[str, str]] = [
        ("", "sentence_transformers.models.Transformer"),
        ("1_Pooling", "sentence_transformers.models.Pooling"),
        ("2_Normalize", "sentence_transformers.models.Normalize"),
    ]
    _write_json(directory / "1_Pooling" / "config.json", _pooling_config(hidden_size, pooling))
    (directory / "2_Normalize").mkdir(exist_ok=True)
    if post is not None:
        _write_post_dense(post, directory / "3_Dense", hidden_size)
        (directory / "4_Normalize").mkdir(exist_ok=True)
        modules += [
            ("3_Dense", "sentence_transformers.models.Dense"),
            ("4_Normalize", "sentence_transformers.models.Normalize"),
        ]
    entries = [
        {"idx": i, "name": str(i), "path": path, "type": kind} for i, (path, kind) in enumerate(modules)
    ]
    _write_json(directory / ST_MODULES_FILE, entries)
    _write_json(
        directory / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False}
    )
    _write_json(
        directory / "config_sentence_transformers.json",
        {
            "model_type": "SentenceTransformer",
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    return [kind for _, kind in modules]
