"""Finishing a training: post-processing fit, threshold/calibration on dev, the saved model directory.

After the loop has chosen its weights, `finish` fits the optional embedding post-processing
(bi-encoders), picks the paraphrase threshold or the graded calibration on dev, and writes the model
directory: weights, tokenizer, `simpair.json` with lineage, `metrics.json`, `train_config.yaml`, and
the dev and training pair ids that evaluation's leakage exclusion reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from simpair.metrics.binary_classification import best_threshold, binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.embedding_postprocess import EmbeddingPostprocess
from simpair.models.inference import raw_outputs, sentence_embeddings
from simpair.models.io import new_model_dir, save_model
from simpair.models.metadata import Calibration, ModelMetadata
from simpair.models.tokenizer import tokenizer_fingerprint
from simpair.pair_tokens import PairTokens
from simpair.training import calibration as calibrate
from simpair.training.checkpoint import dev_metrics
from simpair.training.config import TrainConfig
from simpair.training.data import TrainData


def joined_lines(lines: pa.Array) -> str:
    """The lines as one text, each ended by a newline (an empty list gives one newline, as before).

    Joined by Arrow in one call, so millions of training pairs never become millions of Python strings.
    """
    if len(lines) == 0:
        return "\n"
    text = pa.large_string()
    ended = pc.binary_join_element_wise(
        lines.cast(pa.large_string()), pa.scalar("\n", text), pa.scalar("", text)
    )
    offsets = np.frombuffer(ended.buffers()[1], dtype=np.int64)[ended.offset : ended.offset + len(ended) + 1]
    return bytes(memoryview(ended.buffers()[2])[offsets[0] : offsets[-1]]).decode()


def _train_pair_lines(trained: PairTokens, parent_file: Path | None, chunk: int = 65536) -> Iterator[str]:
    """train_pairs.txt in pieces: the parent stage's lines (if any), then these pairs, one per line."""
    if parent_file is not None and parent_file.is_file():
        with parent_file.open() as lines:
            yield from (line if line.endswith("\n") else line + "\n" for line in lines)
    if len(trained) == 0:
        yield "\n"
    for start in range(0, len(trained), chunk):
        yield joined_lines(trained.subset(np.arange(start, min(start + chunk, len(trained)))).pair_lines())


def fit_postprocess(
    model: BiEncoder,
    trained: PairTokens,
    remove_directions: int,
    pad_id: int,
    device: torch.device,
    dtype: torch.dtype | None,
) -> dict[str, Any]:
    """Fit and attach the embedding transform on the distinct sentences the model was trained on."""
    distinct: dict[bytes, np.ndarray] = {}  # first occurrence order, as the pairs list them
    for col in ("ids_a", "ids_b"):
        for ids in trained.iter_rows(col):
            distinct.setdefault(ids.tobytes(), ids)
    model.post = None
    embeddings = sentence_embeddings(
        model, [ids.tolist() for ids in distinct.values()], pad_id, device, dtype
    )
    model.post = EmbeddingPostprocess.fit(embeddings, remove_directions).to(device)
    return model.post.describe(trained.split_labels(), len(distinct))


@dataclass(frozen=True)
class TrainedRun:
    """One training stage as the loop leaves it: what `finish` turns into a saved model directory.

    `model` holds the chosen weights; `trained` is every training pair (all ranks', before the
    symmetric copy) and `dev_pairs` the dev pairs the threshold is picked on; `parent` and `parent_dir`
    name the earlier stage it started from, if any; `dtype` is the evaluation precision (None: fp32);
    `run_info` is merged into metrics.json beside the dev metrics.
    """

    config: TrainConfig
    home: Path
    model: CrossEncoder | BiEncoder
    tokenizer: Any
    data: TrainData
    trained: PairTokens
    dev_pairs: PairTokens
    parent: ModelMetadata | None
    parent_dir: str | None
    backbone_label: str
    device: torch.device
    dtype: torch.dtype | None
    pad_id: int
    history: list[dict[str, Any]]
    run_info: dict[str, Any]


def _fit_operating_point(
    config: TrainConfig, raw: np.ndarray, dev_pairs: PairTokens
) -> tuple[float, Calibration | None, dict[str, Any]]:
    """The threshold (paraphrase; 0.5 for sts) and calibration fitted on dev, and the dev metrics at them."""
    calibration = None
    threshold = 0.5
    if config.task == "paraphrase":
        labels = dev_pairs.labels if (dev_pairs.labels >= 0).all() else (dev_pairs.targets >= 0.5).astype(int)
        if config.kind == "cross":
            probs = 1 / (1 + np.exp(-raw))
        else:  # Platt scaling of the cosine on dev gives a probability users can read
            calibration = calibrate.platt(raw, labels)
            probs = calibrate.apply(calibration, raw)
        threshold = best_threshold(probs, labels, config.threshold_metric)
        return threshold, calibration, binary_metrics(probs, labels, threshold)
    if config.kind == "cross":
        score = 1 / (1 + np.exp(-raw))
    else:  # monotone sigmoid fitted on dev: 0-1 scores without clipping ties
        calibration = calibrate.graded(raw, dev_pairs.targets)
        score = calibrate.apply(calibration, raw)
    return threshold, calibration, graded_metrics(score, dev_pairs.targets)


def finish(run: TrainedRun) -> Path:
    """Pick threshold/calibration on dev, write the model directory with metrics and lineage."""
    config, model, trained, dev_pairs, parent = run.config, run.model, run.trained, run.dev_pairs, run.parent
    pad_id, device, dtype, run_info = run.pad_id, run.device, run.dtype, run.run_info
    postprocess_info = None
    if config.postprocess is not None and isinstance(model, BiEncoder):
        before = dev_metrics(raw_outputs(model, dev_pairs, pad_id, device, dtype), dev_pairs, config)
        directions = config.postprocess.remove_directions
        postprocess_info = fit_postprocess(model, trained, directions, pad_id, device, dtype)
        run_info = {**run_info, "dev_before_postprocess": before}
    raw = raw_outputs(model, dev_pairs, pad_id, device, dtype, config.symmetric)
    threshold, calibration, dev = _fit_operating_point(config, raw, dev_pairs)

    models = run.home / "models"
    out_dir = Path(config.output_dir) if config.output_dir else new_model_dir(models, config.name)
    parent_file = None
    if parent is not None and parent.train_pairs_file and run.parent_dir is not None:
        parent_file = Path(run.parent_dir) / parent.train_pairs_file
    train_text = _train_pair_lines(trained, parent_file)
    train_splits = trained.split_labels()
    if parent is not None:
        train_splits = sorted(set(train_splits) | set(parent.train_datasets))
    meta = ModelMetadata(
        kind=config.kind,
        task=config.task,
        objective=config.objective,
        threshold=threshold,
        max_length=config.max_length,
        backbone=run.backbone_label,
        symmetric=config.symmetric and config.kind == "cross",
        cross_head=config.cross_head,
        calibration=calibration,
        dataset_versions={**(parent.dataset_versions if parent else {}), **run.data.versions},
        train_datasets=train_splits,
        dev_pair_ids_file="dev_pair_ids.txt",
        train_pairs_file="train_pairs.txt",
        tokenizer_fingerprint=tokenizer_fingerprint(run.tokenizer),
        init_from=run.parent_dir if parent is not None else None,
        embedding_postprocess=postprocess_info,
    )
    metrics = {
        "dev": dev,
        "dev_source": run.data.dev_source,
        "selection_metric": config.metric_for_selection,
        "train_pairs": len(trained),
        "train_pairs_by_dataset": dict(sorted(trained.count_by_dataset().items())),
        "batches_by_dataset": config.batch_per_dataset and len(trained.count_by_dataset()) > 1,
        "dev_pairs": len(dev_pairs),
        "excluded_leaked_train_pairs": run.data.excluded_leaked,
        **run_info,
        "history": run.history,
    }
    save_model(
        model,
        run.tokenizer,
        out_dir,
        meta,
        train_config_yaml=config.to_yaml(),
        metrics=metrics,
        text_files={
            "dev_pair_ids.txt": joined_lines(dev_pairs.pair_id_array()),
            "train_pairs.txt": train_text,
        },
    )
    return out_dir
