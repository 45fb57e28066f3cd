"""The gate's zero-shot baseline: the untrained backbone as a bi-encoder (mean pooling, cosine).

A first model version may only become champion when it beats what the backbone does with no training
at all (the Quora and SBERT baselines in the mission). The baseline is saved in the ordinary model
format, so the gate evaluates it with exactly the code it uses for challenger and champion. For paraphrase
its decision threshold on the cosine is chosen to maximise F1 (`best_threshold`, as training does) on a
training-role split of the evaluation
dataset, never on the evaluation split itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from simpair.catalog import Catalog
from simpair.metrics.binary_classification import best_threshold
from simpair.models import ModelMetadata
from simpair.models.tiny import default_backbone
from simpair.models.zero_shot import save_zero_shot
from simpair.runtime.loader import load_predictor

ZERO_SHOT_DIR = "registry-cache/zero-shot"
THRESHOLD_SAMPLE = 2000  # train pairs used to pick the zero-shot threshold (enough for a stable F1 optimum)


def _threshold_split(catalog: Catalog, dataset: str) -> str | None:
    roles = catalog.splits(dataset)
    for role in ("train", "dev"):
        for split, split_role in roles.items():
            if split_role == role:
                return split
    return None


def zero_shot_model(
    backbone: str, task: str, home: Path, threshold_dataset: str | None = None, seed: int = 0
) -> Path:
    """Saved model dir of the untrained backbone as a bi-encoder (cached per backbone, task and data)."""
    catalog = Catalog(home)
    data_version = catalog.current_version(threshold_dataset) if threshold_dataset else "none"
    key = hashlib.sha1(
        f"{backbone}\x00{task}\x00{threshold_dataset}\x00{data_version}\x00{seed}".encode()
    ).hexdigest()[:12]
    target = Path(home) / ZERO_SHOT_DIR / f"{task}-{key}"
    done = target / "zero_shot.done"
    if done.exists():
        return target
    backbone = backbone or default_backbone()
    save_zero_shot(backbone, task, target, max_length=128, seed=seed)
    meta = ModelMetadata.read(target)
    if task == "paraphrase" and threshold_dataset:
        split = _threshold_split(catalog, threshold_dataset)
        if split is not None:
            frame = catalog.read_split(threshold_dataset, split).filter(pl.col("label").is_not_null())
            frame = frame.sample(n=min(THRESHOLD_SAMPLE, frame.height), seed=0) if frame.height else frame
            if frame.height:
                predictor = load_predictor(target)
                raw = predictor.predict(frame["text_a"].to_list(), frame["text_b"].to_list())["score"]
                meta.threshold = best_threshold(raw, frame["label"].to_numpy(), "f1")
                meta.threshold_source = (
                    f"{threshold_dataset}/{split}@{data_version} (max F1, {frame.height} pairs)"
                )
                meta.write(target)
    done.write_text(f"{backbone}\n")  # written last: a crash part-way never leaves a reusable baseline
    return target
