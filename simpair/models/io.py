"""Save and load model directories in the one format every stage shares.

A model directory holds `model.safetensors`, `config.json`, the tokenizer files, `simpair.json`
(metadata), for bi-encoders the sentence-transformers module files (`modules.json`, ...), and
optionally `train_config.yaml`, `metrics.json` and `dev_pair_ids.txt`. Nothing is pickled: weights
are safetensors, everything else is text. Directories are written under a temporary name and
renamed, so a crash never leaves a half-written model that looks valid.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from simpair.atomic import atomic_path
from simpair.models.bi_encoder import BiEncoder, Pooling
from simpair.models.cross_encoder import CrossEncoder, CrossHead
from simpair.models.metadata import ModelMetadata
from simpair.models.st_export import write_sentence_transformers_files
from simpair.models.tokenizer import load_tokenizer, tokenizer_fingerprint

EncoderModel = CrossEncoder | BiEncoder


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' per-file progress bars (loading/writing shards) inside our own calls."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def build_model(
    kind: str, name_or_path: str | Path, cross_head: CrossHead = "cls", pooling: Pooling = "mean"
) -> EncoderModel:
    """A cross- or bi-encoder from a local directory or hub id (`cross_head`: cross-encoders' head,
    `pooling`: bi-encoders' pooling)."""
    with quiet_transformers():
        if kind == "cross":
            return CrossEncoder.from_pretrained(name_or_path, head=cross_head)
        if kind == "bi":
            return BiEncoder.from_pretrained(name_or_path, pooling=pooling)
    raise ValueError(f"kind must be 'cross' or 'bi', got {kind!r}")


def save_model(
    model: EncoderModel,
    tokenizer: PreTrainedTokenizerBase,
    directory: Path,
    metadata: ModelMetadata,
    *,
    train_config_yaml: str | None = None,
    metrics: dict[str, Any] | None = None,
    text_files: dict[str, str | Iterable[str]] | None = None,
) -> Path:
    """Write a complete model directory atomically (temp dir + rename); replaces an existing one."""
    directory = Path(directory)
    with atomic_path(directory, directory=True) as tmp:
        with quiet_transformers():
            model.save(tmp)
        tokenizer.save_pretrained(str(tmp))
        if isinstance(model, BiEncoder):  # also a sentence-transformers model (simpair.models.st_export)
            write_sentence_transformers_files(
                tmp, model.hidden_size, metadata.max_length, model.post, pooling=model.pooling
            )
        if metadata.tokenizer_fingerprint is None:
            metadata.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer)
        if metadata.created_at is None:
            metadata.created_at = datetime.now(UTC).isoformat(timespec="seconds")
        metadata.write(tmp)
        if train_config_yaml is not None:
            (tmp / "train_config.yaml").write_text(train_config_yaml)
        if metrics is not None:
            (tmp / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        for name, text in (text_files or {}).items():
            with (tmp / name).open("w") as handle:  # pieces, so millions of lines are never one string
                handle.writelines([text] if isinstance(text, str) else text)
    return directory


def new_model_dir(models_root: Path, name: str) -> Path:
    """Reserve `<models_root>/<name>-<UTC second>` (then `-2`, `-3`, ...) by creating it empty.

    Seeds of one config train in parallel (soups, nightly tasks) and can finish in the same second;
    without the reservation the later save would replace the earlier model. `mkdir` is atomic, so
    two processes never get the same directory; the saved model then replaces the empty one.
    """
    models_root = Path(models_root)
    models_root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 10_000):
        candidate = models_root / (f"{name}-{stamp}" if n == 1 else f"{name}-{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RuntimeError(f"no free model directory for {name} under {models_root}")


def load_model(directory: Path) -> tuple[EncoderModel, PreTrainedTokenizerBase, ModelMetadata]:
    """Model (eval mode, CPU), tokenizer and metadata of a saved directory."""
    directory = Path(directory)
    metadata = ModelMetadata.read(directory)
    model = build_model(metadata.kind, directory, metadata.cross_head, metadata.pooling)
    model.eval()
    return model, load_tokenizer(directory), metadata
