"""Fit a bi -> cross cascade on the members' shared dev split and write it as a model directory.

Only dev is used for the bi stage's calibration (when it has none of its own: the untouched backbone).
The band is fitted on dev, plus unlabeled pairs like the traffic when given (`band_pool`: the
cross-encoder's decisions on them are the reference, no label is read). It is the narrowest band whose
decisions differ from the full cross-encoder's on at most the misses its rule allows for
`max_disagreement` (`cascade.allowed_misses`: by default conformal risk control, (k + 1) / (n + 1) <=
max_disagreement: a share meant for pairs the fit has not seen). Test splits stay untouched until
`simpair evaluate` and the promotion gate.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from simpair.ensemble.backbone_member import is_zero_shot, zero_shot_members
from simpair.ensemble.band_pool import BandPool
from simpair.ensemble.cascade_band import band_figures, compare_with_cross, fit_band
from simpair.ensemble.fit import _merge_versions, dev_split_of, shared_dev_frame, write_composite
from simpair.metrics.binary_classification import best_threshold, binary_metrics
from simpair.models.composite import DEFAULT_BAND_RULE, DEFAULT_MAX_DISAGREEMENT, BandRule, CascadeSpec
from simpair.models.metadata import ModelMetadata
from simpair.models.predictor import Predictor
from simpair.models.predictor_base import Call
from simpair.runtime.cascade import BI, CROSS, CascadePredictor
from simpair.runtime.loader import load_predictor
from simpair.training import calibration as calibrate


def _stages(member_dirs: Sequence[Path]) -> tuple[Path, Path]:
    """(bi, cross) directories: exactly one paraphrase bi-encoder and one paraphrase cross-encoder."""
    metas = {Path(d): ModelMetadata.read(d) for d in member_dirs}
    bis = [d for d, m in metas.items() if m.kind == "bi"]
    crosses = [d for d, m in metas.items() if m.kind == "cross"]
    if len(member_dirs) != 2 or len(bis) != 1 or len(crosses) != 1:
        kinds = [f"{d.name}: {m.kind}" for d, m in metas.items()]
        raise ValueError(
            f"a cascade needs one bi-encoder (or zero_shot: the backbone) and one cross-encoder, got {kinds}"
        )
    for d, m in metas.items():
        if m.task != "paraphrase":
            raise ValueError(f"{d}: a {m.task} model; a cascade decides paraphrase labels (task paraphrase)")
    return bis[0], crosses[0]


def _calibrated_bi(bi_dir: Path, raw: np.ndarray, gold: np.ndarray) -> tuple[ModelMetadata, str]:
    """The bi stage's metadata with a Platt calibration: its own (fitted on this dev split in training),
    or, for the untouched backbone or a bi-encoder without one, Platt scaling fitted here on dev."""
    meta = ModelMetadata.read(bi_dir)
    if meta.calibration is not None and not is_zero_shot(meta):
        return meta, "the bi-encoder's own Platt calibration (fitted on dev in training)"
    meta = meta.model_copy()
    meta.calibration = calibrate.platt(raw, gold)
    meta.threshold = best_threshold(calibrate.apply(meta.calibration, raw), gold)
    return meta, "Platt scaling of the cosine fitted on dev by the cascade (simpair.training.calibration)"


def fit_cascade(
    member_dirs: Sequence[str | Path],
    home: str | Path,
    out_dir: str | Path,
    max_disagreement: float = DEFAULT_MAX_DISAGREEMENT,
    zero_shot: bool = False,
    batch_size: int = 64,
    band_rule: BandRule = DEFAULT_BAND_RULE,
    pool: BandPool | None = None,
) -> Path:
    """Fit the band on the members' dev split; write a self-contained `kind: cascade` directory.

    `member_dirs` is one paraphrase cross-encoder and one paraphrase bi-encoder, or the cross-encoder
    alone with `zero_shot` (the bi stage is then its pre-trained backbone, untouched). `pool`: unlabeled
    pairs like the traffic, fitted on beside dev (`simpair.ensemble.band_pool`).
    """
    with tempfile.TemporaryDirectory(prefix="simpair-cascade-") as scratch:
        member_dirs = [Path(d) for d in member_dirs]
        if zero_shot:
            if any(ModelMetadata.read(d).kind == "bi" for d in member_dirs):
                raise ValueError("zero_shot makes the backbone the bi stage; the members already hold one")
            metas = [ModelMetadata.read(d) for d in member_dirs]
            member_dirs += zero_shot_members(metas, Path(scratch))
        bi_dir, cross_dir = _stages(member_dirs)
        return _fit(
            bi_dir, cross_dir, Path(home), Path(out_dir), max_disagreement, batch_size, band_rule, pool
        )


def _on_pool(
    predictor: CascadePredictor, cross: Predictor, pool: BandPool | None, batch_size: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The pool's calibrated bi probabilities and the cross-encoder's decisions (the reference)."""
    if pool is None or not len(pool):
        return None
    p_bi = predictor.bi_probability(pool.text_a, pool.text_b, Call(batch_size))
    return p_bi, np.asarray(cross.predict(pool.text_a, pool.text_b, batch_size=batch_size)["label"])


def _pool_splits(pool: BandPool | None, versions: dict[str, str]) -> set[str]:
    """{"DATASET/SPLIT"} of a split pool, its version added to `versions`; empty for a file pool.

    The band is fitted on those pairs, so for leakage they count as training data, as dev's do; a
    version other than the one the members trained on would leave their ids unaccounted for."""
    if pool is None or pool.origin is None:
        return set()
    dataset, split, version = pool.origin
    if versions.setdefault(dataset, version) != version:
        raise ValueError(
            f"band_pool split {dataset}/{split} is at version {version}, the members trained on version "
            f"{versions[dataset]}: fit the cascade on members of the current version, or pool a file"
        )
    return {f"{dataset}/{split}"}


def _fit(
    bi_dir: Path,
    cross_dir: Path,
    home: Path,
    out_dir: Path,
    max_disagreement: float,
    batch_size: int,
    band_rule: BandRule = DEFAULT_BAND_RULE,
    pool: BandPool | None = None,
) -> Path:
    dirs = [bi_dir, cross_dir]
    metas = [ModelMetadata.read(d) for d in dirs]
    versions = _merge_versions(dirs, metas)
    dev_source, dev = shared_dev_frame(dirs, home)
    dev_split = dev_split_of(dev_source)
    pool_splits = _pool_splits(pool, versions)
    text_a, text_b = dev["text_a"].to_list(), dev["text_b"].to_list()
    gold = dev["label"].to_numpy().astype(np.int64)

    bi, cross = load_predictor(bi_dir, device="cpu"), load_predictor(cross_dir, device="cpu")
    bi_meta, calibration_note = _calibrated_bi(bi_dir, bi.predict_raw(text_a, text_b, batch_size), gold)
    bi.meta = bi_meta
    threshold = float(metas[CROSS].threshold)
    meta = ModelMetadata(
        kind="cascade",
        task="paraphrase",
        objective="cascade",
        threshold=threshold,  # one threshold for every row: the cross-encoder's
        max_length=max(m.max_length for m in metas),
        backbone=metas[CROSS].backbone,  # the zero-shot bar of the promotion gate is built from it
        member_backbones=[m.backbone for m in metas],
        dataset_versions=versions,
        # the band (and a fitted calibration) learnt from the dev pairs, so for leakage they are training
        train_datasets=sorted(
            {t for m in metas for t in m.train_datasets} | {"/".join(dev_split)} | pool_splits
        ),
        dev_pair_ids_file="dev_pair_ids.txt",
        train_pairs_file="train_pairs.txt",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    members = [f"members/{i}-{d.name}" for i, d in enumerate(dirs)]
    draft = CascadeSpec(members=members, band_low=threshold, band_high=threshold)
    predictor = CascadePredictor(meta, draft, [bi, cross])
    full = compare_with_cross(predictor, text_a, text_b, batch_size)  # band empty: bi probabilities
    p_bi, cross_labels = full.cascade["probability"], np.asarray(full.cross["label"])
    if pool is not None:  # a pair already in dev counts once
        pool = pool.without(set(zip(text_a, text_b, strict=True)))
        if not len(pool):
            raise ValueError(f"band_pool {pool.source}: every pair of it is a dev pair, nothing to add")
    pooled = _on_pool(predictor, cross, pool, batch_size)
    fit_p = p_bi if pooled is None else np.concatenate([p_bi, pooled[0]])
    fit_labels = cross_labels if pooled is None else np.concatenate([cross_labels, pooled[1]])
    band = fit_band(fit_p, fit_labels, threshold, max_disagreement, band_rule)
    dev_share, dev_disagreement = band_figures(p_bi, cross_labels, threshold, band.low, band.high)
    pool_figures: dict[str, Any] = {}
    if pool is not None and pooled is not None:
        share, differ = band_figures(*pooled, threshold, band.low, band.high)
        pool_figures = {"pool_source": pool.source, "pool_pairs": len(pool), "pool_share_to_cross": share,
                        "pool_disagreement": differ}  # fmt: skip
    spec = draft.model_copy(
        update={
            "band_low": band.low,
            "band_high": band.high,
            "max_disagreement": max_disagreement,
            "band_rule": band.rule,
            "dev_allowed_misses": band.allowed_misses,  # of the pairs fitted on: dev, and the pool
            "dev_pairs": len(p_bi),
            "dev_share_to_cross": dev_share,
            "dev_disagreement": dev_disagreement,
            "bi_calibration": calibration_note,
            **pool_figures,
        }
    )
    predictor.spec = spec
    cascade = predictor.combine(p_bi, lambda idx: np.asarray(full.cross["probability"])[idx])
    metrics = {
        "dev": binary_metrics(cascade["probability"], gold, threshold),
        "dev_source": dev_source,
        "dev_pairs": len(dev),
        "cascade": {
            "band_low": band.low,
            "band_high": band.high,
            "share_to_cross": dev_share,
            "disagreement": dev_disagreement,
            **pool_figures,
            "max_disagreement": max_disagreement,
            "band_rule": band.rule,
            "allowed_misses": band.allowed_misses,
            "cross_dev": binary_metrics(full.cross["probability"], gold, threshold),
            "bi_dev": binary_metrics(p_bi, gold, float(bi_meta.threshold)),
            "bi_calibration": calibration_note,
        },
    }
    train_pairs = {"\t".join((*dev_split, pair_id)) for pair_id in dev["pair_id"].to_list()}
    if pool is not None and pool.origin is not None and pool.pair_ids is not None:  # the band learnt these
        train_pairs.update("\t".join((*pool.origin[:2], pair_id)) for pair_id in pool.pair_ids)
    for d, m in zip(dirs, metas, strict=True):
        if m.train_pairs_file and (d / m.train_pairs_file).is_file():
            train_pairs.update(line for line in (d / m.train_pairs_file).read_text().splitlines() if line)
    write_composite(
        out_dir,
        dirs,
        spec,
        meta,
        metrics,
        dev["pair_id"].to_list(),
        sorted(train_pairs),
        # the bi member's calibration, when the cascade fitted it
        after_copy=lambda tmp: bi_meta.write(tmp / spec.members[BI]),
    )
    return out_dir
