"""Model soups: one model whose weights are the average of several fine-tunes of the same backbone.

Wortsman et al. (2022), "Model soups": fine-tunes that start from one pre-trained model (different
seeds or hyper-parameters) land in one low-loss basin, so the average of their weights is itself a
good model, often better than each ingredient, at the inference cost of one. The "greedy soup" adds
ingredients in order of dev score and keeps each only if dev does not drop, so the soup can only be
chosen over the best single model on dev evidence. Test splits are never used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simpair.ensemble.fit import shared_dev_frame
from simpair.ensemble.postprocess_refit import refit_postprocess, train_sentences
from simpair.metrics.binary_classification import best_threshold, binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.models import ModelMetadata, save_model
from simpair.runtime.loader import load_predictor
from simpair.training import calibration as calibrate
from simpair.training.averaging import average_states


def _dev_fit(
    predictor: Any, a: list[str], b: list[str], gold: np.ndarray
) -> tuple[ModelMetadata, dict[str, float]]:
    """Threshold / calibration of the current weights on dev (as training does) and the dev metrics."""
    return fit_on_dev(predictor.meta, predictor.predict_raw(a, b), gold)


def fit_on_dev(
    meta: ModelMetadata, raw: np.ndarray, gold: np.ndarray
) -> tuple[ModelMetadata, dict[str, float]]:
    """A copy of `meta` with threshold / calibration fitted to dev raw outputs, and the dev metrics
    (callers that score several weight sets on the same dev pairs tokenize them once)."""
    meta = meta.model_copy()
    if meta.task == "paraphrase":
        labels = gold.astype(np.int64)
        if meta.kind == "cross":
            probs = 1 / (1 + np.exp(-raw.astype(np.float64)))
        else:
            meta.calibration = calibrate.platt(raw, labels)
            probs = calibrate.apply(meta.calibration, raw)
        meta.threshold = best_threshold(probs, labels)
        return meta, binary_metrics(probs, labels, meta.threshold)
    if meta.kind == "cross":
        return meta, graded_metrics(1 / (1 + np.exp(-raw.astype(np.float64))), gold)
    meta.calibration = calibrate.graded(raw, gold)
    return meta, graded_metrics(calibrate.apply(meta.calibration, raw), gold)


def _postprocess_setting(member_dirs: Sequence[Path], metas: Sequence[ModelMetadata]) -> int | None:
    """The ingredients' common `remove_directions`, None if none post-processes its embeddings."""
    settings = [(m.embedding_postprocess or {}).get("remove_directions") for m in metas]
    for d, setting in zip(member_dirs, settings, strict=True):
        if setting != settings[0]:
            raise ValueError(
                f"{d}: embedding post-processing {setting!r} but {member_dirs[0]} has {settings[0]!r}; "
                "pass remove_directions to soup them with one setting"
            )
    return settings[0]


def _architecture(meta: ModelMetadata) -> tuple[Any, ...]:
    """What must match for weights to be averaged: same model, same inputs, same head."""
    return (meta.kind, meta.task, meta.backbone, meta.tokenizer_fingerprint, meta.symmetric, meta.cross_head)


def fit_soup(
    member_dirs: Sequence[str | Path],
    home: str | Path,
    out_dir: str | Path,
    remove_directions: int | None = None,
) -> Path:
    """Greedy soup of same-architecture fine-tunes, written as an ordinary model directory.

    Bi-encoders whose embeddings are post-processed (or any, when `remove_directions` is given) are
    scored with a transform fitted to each candidate's own weights, so the greedy choice sees what the
    saved soup will compute.
    """
    member_dirs = [Path(d) for d in member_dirs]
    if len(member_dirs) < 2:
        raise ValueError("a soup needs at least two fine-tuned models")
    metas = [ModelMetadata.read(d) for d in member_dirs]
    first = metas[0]
    for d, meta in zip(member_dirs[1:], metas[1:], strict=True):
        if _architecture(meta) != _architecture(first):
            raise ValueError(
                f"{d}: a {meta.kind}-encoder ({meta.cross_head} head) for {meta.task} from {meta.backbone}; "
                f"soup ingredients must all be {first.kind}-encoders ({first.cross_head} head) for "
                f"{first.task} fine-tuned from {first.backbone}"
            )
    dev_source, dev = shared_dev_frame(member_dirs, Path(home))
    a, b = dev["text_a"].to_list(), dev["text_b"].to_list()
    gold = (dev["score"] if first.task == "sts" else dev["label"]).to_numpy()
    key = "spearman" if first.task == "sts" else "accuracy"

    if remove_directions is None:
        remove_directions = _postprocess_setting(member_dirs, metas)
    elif first.kind != "bi":
        raise ValueError("remove_directions post-processes bi-encoder embeddings; these are cross-encoders")
    predictors = [load_predictor(d, device="cpu") for d in member_dirs]
    post_info: dict[str, Any] | None = None
    sentences: list[str] = []
    fitted_on: list[str] = []

    def refit(predictor: Any) -> None:
        nonlocal post_info
        if remove_directions is not None:
            post_info = refit_postprocess(predictor, sentences, remove_directions, fitted_on)

    if remove_directions is not None:
        sentences, fitted_on = train_sentences(member_dirs, Path(home))
        for p, meta in zip(predictors, metas, strict=True):
            if (meta.embedding_postprocess or {}).get("remove_directions") != remove_directions:
                refit(p)
    singles = [_dev_fit(p, a, b, gold)[1][key] for p in predictors]
    order = sorted(range(len(predictors)), key=lambda i: -singles[i])
    # copies: the first ingredient's model object is overwritten by every candidate soup below
    states = [{k: v.detach().clone() for k, v in predictors[i].model.state_dict().items()} for i in order]
    soup = predictors[order[0]]  # its model object is reused for every candidate soup
    kept, best = [order[0]], singles[order[0]]
    for i, state in zip(order[1:], states[1:], strict=True):
        soup.model.load_state_dict(average_states([states[order.index(j)] for j in kept] + [state]))
        refit(soup)
        score = _dev_fit(soup, a, b, gold)[1][key]
        if score >= best:
            kept, best = [*kept, i], score
    soup.model.load_state_dict(average_states([states[order.index(j)] for j in kept]))
    refit(soup)
    meta, dev_metrics = _dev_fit(soup, a, b, gold)
    meta.embedding_postprocess = post_info
    meta.created_at = None
    meta.init_from = None
    meta.soup_of = [member_dirs[i].name for i in kept]
    train_lines: set[str] = set()
    for i in kept:
        lines = (member_dirs[i] / (metas[i].train_pairs_file or "train_pairs.txt")).read_text().splitlines()
        train_lines.update(line for line in lines if line)
    walls = [json.loads((member_dirs[i] / "metrics.json").read_text()).get("wall_seconds") for i in kept]
    metrics = {
        "dev": dev_metrics,
        # the ingredients' training, one after the other (in parallel processes it is their maximum)
        "wall_seconds": sum(w for w in walls if w is not None),
        "dev_source": dev_source,
        "dev_pairs": len(dev),
        "soup": {
            "rule": "greedy (Wortsman et al. 2022): add in order of dev score, keep if dev does not drop",
            "ingredients_dev": {member_dirs[i].name: singles[i] for i in order},
            "kept": [member_dirs[i].name for i in kept],
            "metric": key,
        },
    }
    return save_model(
        soup.model,
        soup.tokenizer,
        Path(out_dir),
        meta,
        metrics=metrics,
        text_files={
            "dev_pair_ids.txt": "\n".join(dev["pair_id"].to_list()) + "\n",
            "train_pairs.txt": "\n".join(sorted(train_lines)) + "\n",
        },
        train_config_yaml=(member_dirs[kept[0]] / "train_config.yaml").read_text()
        if (member_dirs[kept[0]] / "train_config.yaml").is_file()
        else None,
    )
