"""Bring a model the team already has into the registry (`simpair models import`): adopt, fit, register.

The source (a sentence-transformers folder, a Hugging Face sequence-classification folder, a hub id in
the local Hugging Face cache, or a simpair model folder) is adopted as a simpair model folder
(`simpair.models.foreign`), staged beside it with its weights linked, fitted on a dev file when one
is given, and registered with its provenance (`simpair.registry.imported`).

With a labelled dev file (a pairs file in the canonical columns, or an ingested `dataset/split`), a
paraphrase model gets the threshold that maximises dev accuracy (as training chooses it by default),
and every model a precision verdict measured on those pairs (`simpair.selection.precision_ladder`);
both travel with the version, as does a reference profile of its scores on those pairs that every
scoring run's drift check compares with (`simpair.monitoring.reference`). Without one there is no
threshold (scoring writes the probability and leaves `label` empty), `--precision auto` scores in
fp32 and drift is not checked. Above the runtime for that measurement,
as the night is: it measures each trained model's ladder before registering it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from simpair.catalog import Catalog, CatalogError
from simpair.models.foreign import ForeignModelError, adopt
from simpair.models.metadata import METADATA_FILE, ModelMetadata
from simpair.monitoring.reference import build_reference
from simpair.registry import registry
from simpair.registry.imported import (
    ALIASES,
    Alias,
    ImportRefused,
    ImportResult,
    provenance_of,
    register_imported,
    stage,
)

THRESHOLD_METRIC = "accuracy"  # what training chooses its threshold by unless a config says f1


def read_dev(dev: str, home: Path, task: str) -> tuple[str, pl.DataFrame]:
    """(label, frame of text_a, text_b, label, score) from a labelled pairs file or an ingested split.

    A file is read and validated as `simpair evaluate --file` does (0/1 `label` for paraphrase, a 0-1
    `score` for sts); rows it cannot use are dropped and counted, never guessed.
    """
    from simpair.evaluation.file.validate import validate_pairs
    from simpair.pair_files import PairsFileError, read_pairs_file

    path = Path(dev).expanduser()
    if path.exists():
        try:
            rows = validate_pairs(read_pairs_file(path), path, "binary" if task == "paraphrase" else "graded")
        except PairsFileError as exc:
            raise ImportRefused(f"--dev {exc}") from None
        n = len(rows.text_a)
        gold = np.asarray(rows.gold)
        frame = pl.DataFrame(
            {
                "pair_id": [str(i) for i in rows.rows],
                "text_a": rows.text_a,
                "text_b": rows.text_b,
                "label": pl.Series(
                    gold.astype(np.int8) if task == "paraphrase" else [None] * n, dtype=pl.Int8
                ),
                "score": pl.Series(
                    gold.astype(np.float32) if task == "sts" else [None] * n, dtype=pl.Float32
                ),
            }
        )
        return str(path.resolve()), frame
    if dev.count("/") == 1:
        dataset, split = dev.split("/")
        try:
            catalog = Catalog(home)
            frame = catalog.read_split(dataset, split)
            return f"{dataset}/{split}@{catalog.current_version(dataset)}", frame
        except (CatalogError, FileNotFoundError) as exc:
            raise ImportRefused(f"--dev {dev}: no such file, and not an ingested split ({exc})") from None
    raise ImportRefused(f"--dev {dev}: no such file, and not an ingested split (dataset/split)")


def fit_on_dev(model_dir: Path, home: Path, dev_label: str, frame: pl.DataFrame) -> dict[str, float]:
    """Choose a paraphrase model's threshold on dev, record its dev figures, measure its precisions.

    Writes into `model_dir` (a staging copy, never the adopted folder): `simpair.json` with the
    threshold, `metrics.json` with the dev figures, `precision_verdict.json`.
    """
    from simpair.metrics.binary_classification import best_threshold, binary_metrics
    from simpair.metrics.graded_similarity import graded_metrics
    from simpair.runtime.loader import load_predictor
    from simpair.selection.precision_ladder import measure

    meta = ModelMetadata.read(model_dir)
    predictor = load_predictor(model_dir)
    out = predictor.predict(frame["text_a"].to_list(), frame["text_b"].to_list())
    binary = meta.task == "paraphrase" and frame["label"].null_count() == 0
    if binary:
        gold = frame["label"].to_numpy().astype(np.int64)
        meta.threshold = best_threshold(out["probability"], gold, THRESHOLD_METRIC)
        meta.threshold_chosen = True
        meta.threshold_source = f"{dev_label} (max {THRESHOLD_METRIC}, {frame.height} pairs)"
        metrics = binary_metrics(out["probability"], gold, meta.threshold)
    else:
        metrics = graded_metrics(out["score"], frame["score"].to_numpy().astype(np.float64))
    meta.write(model_dir)
    figures = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float)}
    (model_dir / "metrics.json").write_text(
        json.dumps({"dev": figures, "dev_file": dev_label}, indent=2, sort_keys=True) + "\n"
    )
    measure(model_dir, home, dev=(dev_label, frame)).write(model_dir)
    return figures


def _alias_for(home: Path, name: str) -> str:
    """`--alias auto`: a model the team brings becomes champion where there is none yet, else challenger
    (so it is gated against the champion like any new version)."""
    current = registry.version_for(registry.client(home), name, registry.CHAMPION)
    return registry.CHAMPION if current is None else registry.CHALLENGER


def import_model(
    home: Path,
    source: str,
    task: str,
    *,
    dev: str | None = None,
    name: str | None = None,
    alias: Alias = "auto",
) -> ImportResult:
    """Adopt `source`, fit it on `dev` if given, register it as a version and move an alias.

    `alias="auto"`: champion when the registered model has none yet, else challenger. Everything that
    can be refused (task, alias, source, dev file) is checked before anything is registered.
    """
    if task not in registry.MODEL_NAMES:
        raise ImportRefused(f"--task must be one of {sorted(registry.MODEL_NAMES)}, got {task!r}")
    if alias not in ALIASES:
        raise ImportRefused(f"--alias must be one of {', '.join(ALIASES)}, got {alias!r}")
    home = Path(home)
    candidate = Path(source).expanduser()
    try:
        model_dir = candidate if (candidate / METADATA_FILE).is_file() else adopt(source, home, task=task)
    except ForeignModelError as exc:
        raise ImportRefused(str(exc)) from None
    if (found := ModelMetadata.read(model_dir).task) != task:
        raise ImportRefused(f"{source}: a simpair model for task {found}, not {task}")
    dev_frame = read_dev(dev, home, task) if dev is not None else None
    staging_root = home / "imported"
    staging_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".register-", dir=staging_root) as tmp:
        staged = stage(model_dir, Path(tmp) / model_dir.name)
        meta = ModelMetadata.read(staged)
        meta.imported = provenance_of(model_dir, source)
        meta.write(staged)
        dev_metrics = fit_on_dev(staged, home, *dev_frame) if dev_frame is not None else {}
        result = register_imported(
            home,
            staged,
            source,
            name=name,
            alias=_alias_for(home, name or registry.model_name(task)) if alias == "auto" else alias,
            dev=dev_frame[0] if dev_frame is not None else None,
            dev_metrics=dev_metrics,
        )
        if dev_frame is not None:  # the version's reference for drift checks, on the same dev pairs
            result.reference = build_reference(
                home, staged, result.name, result.version, result.run_id, dev_frame[1], dev_frame[0]
            )
        return result
