"""Register a model the team already has (`simpair models import`) as a version like any trained one.

The source (a sentence-transformers folder, a Hugging Face classifier folder, a hub id in the local
cache, or a simpair model folder) is adopted (`simpair.models.foreign`) and registered under the
task's name (`simpair-paraphrase`, `simpair-sts`) with its provenance as version tags: origin
`imported`, the source path or hub id and revision, the content hash of its files, the date. A
registered model with no champion yet takes it as `champion` (a team starts with the model it has and
lets the night try to beat it); otherwise it becomes `challenger`, unless the caller says otherwise.

With a labelled dev file (a pairs file in the canonical columns, or an ingested `dataset/split`), a
paraphrase model gets the threshold that maximises dev accuracy (as training chooses it by default)
and every model a precision verdict measured on those pairs (`simpair.runtime.precision_ladder`),
both stored with the version. Without one there is no threshold (scoring writes the probability and
leaves `label` empty) and `--precision auto` scores in fp32. The gate needs nothing more: it
re-evaluates champion and challenger on the same evaluation splits whatever their origin.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import mlflow
import numpy as np
import polars as pl

from simpair.catalog import Catalog, CatalogError
from simpair.models.foreign import ForeignModelError, adopt, content_sha256, link_file
from simpair.models.metadata import METADATA_FILE, ModelMetadata
from simpair.models.precision_verdict import PrecisionVerdict
from simpair.registry import registry, tracking
from simpair.registry.pyfunc import log_pyfunc
from simpair.registry.record import DESCRIPTIONS
from simpair.registry.registry import CHALLENGER, CHAMPION

Alias = Literal["auto", "champion", "challenger", "none"]
ALIASES: tuple[str, ...] = ("auto", "champion", "challenger", "none")
THRESHOLD_METRIC = "accuracy"  # what training chooses its threshold by unless a config says f1


class ImportRefused(ValueError):
    """A model or dev file that cannot be imported as asked; the message says why in one line."""


@dataclass
class ImportResult:
    """What `import_model` registered and which alias it moved."""

    name: str
    version: str
    run_id: str
    task: str
    kind: str
    source: str
    content_sha256: str
    alias: str | None
    previous_champion: str | None
    threshold: float | None
    dev: str | None
    dev_metrics: dict[str, float] = field(default_factory=dict)
    precision: str | None = None  # what `--precision auto` takes, and why

    def lines(self) -> list[str]:
        """What happened, for the console: one fact a line."""
        out = [f"registered {self.name}/{self.version} ({self.kind}, task {self.task}) from {self.source}"]
        if self.alias == CHAMPION and self.previous_champion is None:
            out.append(
                f"{self.name} had no champion: v{self.version} is the champion; the night tries to beat it"
            )
        elif self.alias == CHAMPION:
            out.append(f"champion moved v{self.previous_champion} -> v{self.version}")
        elif self.alias == CHALLENGER:
            out.append(
                f"v{self.version} is the challenger (champion stays v{self.previous_champion}); "
                "the next gate compares them"
            )
        else:
            out.append(f"no alias moved (champion stays {self.previous_champion or 'unset'})")
        if self.dev is None:
            out.append(
                "no dev file: no threshold (probability only, label left empty); auto precision is fp32"
            )
        else:
            shown = ", ".join(
                f"{k} {v:.4f}" for k, v in self.dev_metrics.items() if k in ("accuracy", "f1", "spearman")
            )
            threshold = f"threshold {self.threshold:.4f}, " if self.threshold is not None else ""
            out.append(f"dev {self.dev}: {threshold}{shown}")
            out.append(f"precision verdict: {self.precision}")
        return out


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
    from simpair.evaluation.binary_classification import best_threshold, binary_metrics
    from simpair.evaluation.graded_similarity import graded_metrics
    from simpair.models.predictor import Predictor
    from simpair.runtime.precision_ladder import measure

    meta = ModelMetadata.read(model_dir)
    predictor = Predictor.load(model_dir)
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


def _stage(model_dir: Path, staging: Path) -> Path:
    """A copy of the model folder to register: weights linked, small files copied (they get rewritten)."""

    def place(src: str, dst: str) -> None:
        if src.endswith(".safetensors"):
            link_file(Path(src), Path(dst))
        else:
            shutil.copy2(src, dst)

    shutil.copytree(model_dir, staging, copy_function=place)
    return staging


def _provenance(model_dir: Path, source: str) -> dict[str, Any]:
    """The adopted folder's provenance; a simpair folder brought as it is gets one now."""
    meta = ModelMetadata.read(model_dir)
    if meta.imported is not None:
        return dict(meta.imported)
    files = sorted(p for p in model_dir.iterdir() if p.is_file() and p.suffix == ".safetensors")
    return {
        "origin": "imported",
        "source": source,
        "shape": "simpair",
        "content_sha256": content_sha256(files),
        "imported_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


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

    `alias="auto"`: champion when the registered model has none yet, else challenger.
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
    if ModelMetadata.read(model_dir).task != task:
        raise ImportRefused(
            f"{source}: a simpair model for task {ModelMetadata.read(model_dir).task}, not {task}"
        )
    dev_frame = read_dev(dev, home, task) if dev is not None else None  # before anything is written
    provenance = _provenance(model_dir, source)
    name = name or registry.model_name(task)
    staging_root = home / "imported"
    staging_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".register-", dir=staging_root) as tmp:
        staged = _stage(model_dir, Path(tmp) / model_dir.name)
        meta = ModelMetadata.read(staged)
        meta.imported = provenance
        meta.write(staged)
        dev_metrics: dict[str, float] = {}
        if dev_frame is not None:
            dev_metrics = fit_on_dev(staged, home, *dev_frame)
        meta = ModelMetadata.read(staged)
        verdict = PrecisionVerdict.read(staged)
        run_id, version = _register(home, staged, meta, name, provenance, dev_metrics)
    c = registry.client(home)
    previous = registry.version_for(c, name, CHAMPION)
    chosen = (CHAMPION if previous is None else CHALLENGER) if alias == "auto" else alias
    if chosen == CHAMPION:
        reason = f"imported from {provenance.get('source', source)}"
        registry.move_champion(c, name, version, reason=reason, by="import", action="promote")
    elif chosen == CHALLENGER:
        registry.set_challenger(c, name, version)
    return ImportResult(
        name=name,
        version=version,
        run_id=run_id,
        task=task,
        kind=meta.kind,
        source=str(provenance.get("source", source)),
        content_sha256=str(provenance.get("content_sha256", "")),
        alias=None if chosen == "none" else chosen,
        previous_champion=previous,
        threshold=float(meta.threshold) if meta.threshold_chosen and task == "paraphrase" else None,
        dev=dev_frame[0] if dev_frame is not None else None,
        dev_metrics=dev_metrics,
        precision=verdict.why(verdict.choose()) if verdict is not None else None,
    )


def _register(
    home: Path,
    model_dir: Path,
    meta: ModelMetadata,
    name: str,
    provenance: dict[str, Any],
    dev_metrics: dict[str, float],
) -> tuple[str, str]:
    """An `import-<task>` MLflow run holding the pyfunc, and a version tagged with its provenance."""
    experiment_id = tracking.ensure_experiment(home)
    c = registry.client(home)
    registry.ensure_registered_model(c, name, DESCRIPTIONS.get(name, "simpair model"))
    run_tags = tracking.run_tags(
        None, {"simpair.task": meta.task, "simpair.kind": meta.kind, "simpair.origin": "imported"}
    )
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=f"import-{meta.task}-{model_dir.name}", tags=run_tags
    ) as run:
        mlflow.log_params({f"import.{k}": str(v)[:500] for k, v in provenance.items() if v is not None})
        final = tracking.log_numeric_metrics({"dev": dev_metrics}) if dev_metrics else {}
        tracking.log_artifacts(
            [p for p in (model_dir / METADATA_FILE, model_dir / "metrics.json") if p.is_file()],
            artifact_path="model_files",
        )
        info = log_pyfunc(model_dir, meta.task)
        run_id = run.info.run_id
    verdict = PrecisionVerdict.read(model_dir)
    threshold_source = getattr(meta, "threshold_source", None)
    version_tags = {
        "task": meta.task,
        "kind": meta.kind,
        "objective": meta.objective,
        "backbone": meta.backbone,
        "run_id": run_id,
        "origin": "imported",
        **{f"import.{k}": v for k, v in provenance.items() if v is not None},
        "threshold": f"{meta.threshold:.6g}" if meta.threshold_chosen else "none",
        **({"threshold_source": threshold_source} if threshold_source else {}),
        **{f"metric.{k}": f"{v:.6g}" for k, v in final.items()},
        **(verdict.to_tags() if verdict else {}),
    }
    mv = mlflow.register_model(f"models:/{info.model_id}", name, tags=registry.tag_values(version_tags))
    return run_id, str(mv.version)
