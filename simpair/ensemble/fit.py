"""Fit a stacked model on the members' shared dev split and write it as a model directory.

Only dev is used: the combiner's coefficients and regularisation, and (paraphrase) the decision
threshold, which is chosen on out-of-fold dev probabilities so the threshold never sees the same
predictions the combiner was fitted to. Test splits stay untouched until `simpair evaluate`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_val_predict

from simpair.atomic import atomic_path
from simpair.catalog import Catalog
from simpair.ensemble.backbone_member import is_zero_shot, zero_shot_members
from simpair.metrics.binary_classification import best_threshold, binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.metrics.threshold_free import roc_auc, spearman
from simpair.models.composite import StackSpec
from simpair.models.metadata import ModelMetadata
from simpair.models.predictor_base import Call
from simpair.runtime.loader import load_predictor
from simpair.runtime.stack_features import LEXICAL_FEATURES, product_name, product_pairs
from simpair.runtime.stacked import StackedPredictor

GRID = np.logspace(-3, 3, 13)
FOLDS = 5
SEED = 13


def _dev_reference(member_dir: Path) -> tuple[str, list[str]]:
    """(dataset/split, pair ids) of the dev pairs a member was tuned on."""
    metrics_file = member_dir / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.is_file() else {}
    meta = ModelMetadata.read(member_dir)
    source = metrics.get("dev_source")
    ids_file = member_dir / (meta.dev_pair_ids_file or "dev_pair_ids.txt")
    if not source or not ids_file.is_file():
        raise ValueError(f"{member_dir}: no dev split recorded (metrics.json dev_source, {ids_file.name})")
    return str(source), ids_file.read_text().split()


def dev_split_of(source: str) -> tuple[str, str]:
    """(dataset, split) the dev pairs come from: "stsb/dev", or "msrp/train carved 0.1 seed 13"."""
    dataset, split = source.split()[0].split("/", 1)
    return dataset, split


def shared_dev_frame(member_dirs: Sequence[Path], home: Path) -> tuple[str, Any]:
    """The dev pairs every member was tuned on; members tuned on different pairs cannot be stacked.

    Zero-shot members were tuned on nothing, so any dev split is unseen by them.
    """
    member_dirs = [d for d in member_dirs if not is_zero_shot(ModelMetadata.read(d))]
    if not member_dirs:
        raise ValueError("no trained member: a dev split comes from the trained members")
    refs = [_dev_reference(d) for d in member_dirs]
    source, ids = refs[0]
    for d, (other_source, other_ids) in zip(member_dirs[1:], refs[1:], strict=True):
        if other_source != source or set(other_ids) != set(ids):
            raise ValueError(
                f"{d}: tuned on dev {other_source} ({len(other_ids)} pairs) but {member_dirs[0]} on "
                f"{source} ({len(ids)} pairs); stacked members must share one dev split"
            )
    dataset, split = dev_split_of(source)
    frame = Catalog(home).read_split(dataset, split)
    frame = frame.filter(frame["pair_id"].is_in(ids))
    if frame.is_empty():
        raise ValueError(f"dev split {source}: none of the members' {len(ids)} dev pairs found in {home}")
    return source, frame


def _merge_versions(member_dirs: Sequence[Path], metas: Sequence[ModelMetadata]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for d, meta in zip(member_dirs, metas, strict=True):
        for dataset, version in meta.dataset_versions.items():
            if merged.setdefault(dataset, version) != version:
                raise ValueError(
                    f"{d}: trained on {dataset} version {version}, another member on {merged[dataset]}; "
                    "stack members trained on the same dataset versions"
                )
    return merged


def _fit_combiner(
    x: np.ndarray, y: np.ndarray, task: str
) -> tuple[Any, float, np.ndarray, Literal["ridge", "logistic"]]:
    """(fitted estimator, chosen regularisation, out-of-fold predictions, combiner name)."""
    if task == "sts":
        cv = KFold(FOLDS, shuffle=True, random_state=SEED)
        search = GridSearchCV(Ridge(), {"alpha": GRID}, cv=cv, scoring="neg_mean_squared_error")
        search.fit(x, y)
        oof = cross_val_predict(Ridge(alpha=search.best_params_["alpha"]), x, y, cv=cv)
        return search.best_estimator_, float(search.best_params_["alpha"]), oof, "ridge"
    cv = StratifiedKFold(FOLDS, shuffle=True, random_state=SEED)
    search = GridSearchCV(LogisticRegression(max_iter=1000), {"C": GRID}, cv=cv, scoring="neg_log_loss")
    search.fit(x, y)
    best_c = float(search.best_params_["C"])
    oof = cross_val_predict(LogisticRegression(C=best_c, max_iter=1000), x, y, cv=cv, method="predict_proba")
    return search.best_estimator_, best_c, oof[:, 1], "logistic"


def fit_stack(
    member_dirs: Sequence[str | Path],
    home: str | Path,
    out_dir: str | Path,
    lexical: bool = True,
    threshold_metric: Literal["accuracy", "f1"] = "accuracy",
    batch_size: int = 64,
    zero_shot: bool = False,
    products: bool = False,
) -> Path:
    """Fit the combiner on the members' dev split; write a self-contained `kind: stacked` directory.

    `zero_shot` adds the members' pre-trained backbone, untouched, as one more member
    (`simpair.ensemble.backbone_member`). `products` adds the members' outputs squared and multiplied
    pairwise (a degree-2 combiner, still linear in its coefficients).
    """
    with tempfile.TemporaryDirectory(prefix="simpair-stack-") as scratch:
        member_dirs = [Path(d) for d in member_dirs]
        if zero_shot:
            metas = [ModelMetadata.read(d) for d in member_dirs]
            member_dirs += zero_shot_members(metas, Path(scratch))
        return _fit_stack(
            member_dirs, Path(home), Path(out_dir), lexical, products, threshold_metric, batch_size
        )


def _fit_stack(
    member_dirs: list[Path],
    home: Path,
    out_dir: Path,
    lexical: bool,
    products: bool,
    threshold_metric: Literal["accuracy", "f1"],
    batch_size: int,
) -> Path:
    if len(member_dirs) < 2:
        raise ValueError("a stack needs at least two member models")
    metas = [ModelMetadata.read(d) for d in member_dirs]
    for d, meta in zip(member_dirs, metas, strict=True):
        if meta.kind == "stacked":
            raise ValueError(f"{d}: is itself a stacked model; stack its members instead")
    tasks = {meta.task for meta in metas}
    if len(tasks) != 1:
        raise ValueError(f"members have different tasks {sorted(tasks)}; stack models of one task")
    task = tasks.pop()
    versions = _merge_versions(member_dirs, metas)
    dev_source, dev = shared_dev_frame(member_dirs, home)
    dev_split = dev_split_of(dev_source)

    features = [f"member:{i}" for i in range(len(member_dirs))] + (list(LEXICAL_FEATURES) if lexical else [])
    if products:
        features += [product_name(i, j) for i, j in product_pairs(len(member_dirs))]
    spec = StackSpec(
        combiner="ridge" if task == "sts" else "logistic",
        members=[f"members/{i}-{d.name}" for i, d in enumerate(member_dirs)],
        features=features,
        mean=[0.0] * len(features),
        scale=[1.0] * len(features),
        coef=[0.0] * len(features),
        intercept=0.0,
        regularisation=0.0,
    )
    members = [load_predictor(d) for d in member_dirs]
    text_a, text_b = dev["text_a"].to_list(), dev["text_b"].to_list()
    placeholder = ModelMetadata(kind="stacked", task=task, objective="stack", backbone="stack")  # type: ignore[arg-type]
    x = StackedPredictor(placeholder, spec, members).features(text_a, text_b, Call(batch_size))
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    xs = (x - mean) / scale
    gold = dev["score"] if task == "sts" else dev["label"]
    y = gold.to_numpy().astype(np.float64 if task == "sts" else np.int64)
    estimator, reg, oof, combiner = _fit_combiner(xs, y, task)

    coef = np.ravel(estimator.coef_)
    intercept = float(np.ravel(np.atleast_1d(estimator.intercept_))[0])
    spec = spec.model_copy(
        update={
            "combiner": combiner,
            "mean": mean.tolist(),
            "scale": scale.tolist(),
            "coef": coef.tolist(),
            "intercept": intercept,
            "regularisation": reg,
        }
    )
    member_dev = []
    for i, d in enumerate(member_dirs):
        column = x[:, i]
        if task == "sts":
            member_dev.append({"member": d.name, "spearman": spearman(column, y)})
        else:
            member_dev.append({"member": d.name, "roc_auc": roc_auc(y, column)})
    if task == "sts":
        threshold = 0.5
        dev_metrics = graded_metrics(np.clip(oof, 0, 1), y)
        in_sample = graded_metrics(np.clip(xs @ coef + intercept, 0, 1), y)
    else:
        threshold = best_threshold(oof, y, threshold_metric)
        dev_metrics = binary_metrics(oof, y, threshold)
        fitted = 1.0 / (1.0 + np.exp(-(xs @ coef + intercept)))
        in_sample = binary_metrics(fitted, y, threshold)

    meta = ModelMetadata(
        kind="stacked",
        task=task,  # type: ignore[arg-type]
        objective=f"stack:{combiner}",
        threshold=float(threshold),
        max_length=max(m.max_length for m in metas),
        backbone=metas[0].backbone,  # the zero-shot bar of the promotion gate is built from it
        member_backbones=[m.backbone for m in metas],
        dataset_versions=versions,
        # the combiner learnt from the dev pairs' labels, so for leakage they are training data
        train_datasets=sorted({t for m in metas for t in m.train_datasets} | {"/".join(dev_split)}),
        dev_pair_ids_file="dev_pair_ids.txt",
        train_pairs_file="train_pairs.txt",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    metrics = {
        "dev": dev_metrics,
        "dev_note": f"out-of-fold ({FOLDS}-fold cross-validation on {dev_source})",
        "dev_in_sample": in_sample,
        "dev_source": dev_source,
        "dev_pairs": len(dev),
        "members_dev": member_dev,
        "stack": spec.model_dump(mode="json"),
    }
    train_pairs = {"\t".join((*dev_split, pair_id)) for pair_id in dev["pair_id"].to_list()}
    for d, m in zip(member_dirs, metas, strict=True):
        if m.train_pairs_file and (d / m.train_pairs_file).is_file():
            train_pairs.update(line for line in (d / m.train_pairs_file).read_text().splitlines() if line)
    write_composite(out_dir, member_dirs, spec, meta, metrics, dev["pair_id"].to_list(), sorted(train_pairs))
    return out_dir


def write_composite(
    out_dir: Path,
    member_dirs: Sequence[Path],
    spec: Any,
    meta: ModelMetadata,
    metrics: dict[str, Any],
    dev_ids: list[str],
    train_pairs: list[str],
    after_copy: Callable[[Path], None] | None = None,
) -> None:
    """A stack's or cascade's directory (members copied under `spec.members`, then `after_copy(tmp)`,
    the spec, metadata, metrics and pair lists), through a temp directory and a rename, as for every
    model directory: a crash never leaves half a composite model."""
    with atomic_path(out_dir, directory=True) as tmp:
        for rel, src in zip(spec.members, member_dirs, strict=True):
            shutil.copytree(src, tmp / rel)
        if after_copy is not None:
            after_copy(tmp)
        spec.write(tmp)
        meta.write(tmp)
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        (tmp / "dev_pair_ids.txt").write_text("\n".join(dev_ids) + "\n")
        (tmp / "train_pairs.txt").write_text("\n".join(train_pairs) + ("\n" if train_pairs else ""))
