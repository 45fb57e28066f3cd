"""Record one trained model in MLflow: a run with everything needed to reproduce and judge it, and a
new registered model version built from it.

Registration is split in two steps on purpose: `register_trained_model` creates the run and the version
(no alias moves), `mark_challenger` points `challenger` at it. The nightly flow registers every task's
model first and only then moves aliases, so a failure part-way through a night never leaves one task's
aliases moved and the other's not.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow

from simpair.catalog import Catalog, CatalogError
from simpair.models import ModelMetadata
from simpair.models.composite import CascadeSpec
from simpair.models.precision_verdict import PrecisionVerdict
from simpair.registry import registry, tracking
from simpair.registry.pyfunc import log_pyfunc
from simpair.stages import step

DESCRIPTIONS = {
    "simpair-paraphrase": "Paraphrase detection: text_a, text_b -> score, probability, label (simpair).",
    "simpair-sts": "Graded semantic similarity: text_a, text_b -> score in [0, 1] (simpair).",
}
ROLE_CONTEXT = {"train": "training", "dev": "validation", "test": "evaluation"}


@dataclass(frozen=True)
class RegisteredVersion:
    """A model version created from a training run."""

    task: str
    name: str
    version: str
    run_id: str


def dataset_refs(
    home: Path, dataset_versions: Mapping[str, str], roles: Iterable[str] = ("train", "dev")
) -> list[tracking.DatasetRef]:
    """The splits a model was trained and tuned on, at the versions its metadata records."""
    catalog = Catalog(home)
    wanted = set(roles)
    refs: list[tracking.DatasetRef] = []
    for dataset, version in sorted(dataset_versions.items()):
        try:
            manifest = catalog.manifest(dataset, version)
        except (CatalogError, FileNotFoundError):
            continue
        for info in manifest.get("splits", []):
            split, role = info["split"], info.get("role", "train")
            if role in wanted:
                path = catalog.split_path(dataset, split, version)
                refs.append(tracking.DatasetRef(dataset, split, version, path, ROLE_CONTEXT.get(role, role)))
    return refs


def _model_files(model_dir: Path, meta: ModelMetadata) -> list[Path]:
    names = ["metrics.json", "train_config.yaml", "simpair.json"]
    if meta.dev_pair_ids_file:
        names.append(meta.dev_pair_ids_file)
    return [model_dir / n for n in names]


def _cascade_tags(model_dir: Path, meta: ModelMetadata) -> dict[str, str]:
    """A cascade's band and what it did on dev (`cascade.*`), so the version shows them in MLflow."""
    if meta.kind != "cascade":
        return {}
    return CascadeSpec.read(model_dir).tags()


def _precision_tags(model_dir: Path) -> dict[str, str]:
    """The precision ladder's cached verdict (`simpair.precision.*`), so the gate report can show it."""
    verdict = PrecisionVerdict.read(model_dir)
    return verdict.to_tags() if verdict else {}


@step("register-model", run_name="register-{model_dir.name}", **tracking.MLFLOW_STEP)
def register_trained_model(
    home: Path,
    model_dir: Path,
    config: Mapping[str, Any],
    metrics: Mapping[str, Any],
    history: Iterable[Mapping[str, Any]] = (),
    eval_metrics: Mapping[str, Any] | None = None,
    eval_artifacts: Iterable[Path] = (),
    flow_tags: Mapping[str, str] | None = None,
) -> RegisteredVersion:
    """Log the training run (params, metrics, artifacts, datasets, tags) and register a new version."""
    model_dir = Path(model_dir)
    meta = ModelMetadata.read(model_dir)
    name = registry.model_name(meta.task)
    experiment_id = tracking.ensure_experiment(home)
    c = registry.client(home)
    registry.ensure_registered_model(c, name, DESCRIPTIONS.get(name, "simpair model"))
    chash = tracking.config_hash(config)
    tags = tracking.run_tags(
        flow_tags, {"simpair.task": meta.task, "simpair.kind": meta.kind, "config_hash": chash}
    )
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=f"train-{meta.task}-{model_dir.name}", tags=tags
    ) as run:
        mlflow.log_params(tracking.flatten(config))
        mlflow.log_dict(dict(config), "config/train_config.json")
        tracking.log_history(history)
        final = tracking.log_numeric_metrics(metrics)
        evaluated = tracking.log_numeric_metrics({"eval": dict(eval_metrics)}) if eval_metrics else {}
        tracking.log_artifacts(_model_files(model_dir, meta), artifact_path="model_files")
        tracking.log_artifacts(eval_artifacts, artifact_path="evaluation")
        tracking.log_datasets(dataset_refs(home, meta.dataset_versions))
        info = log_pyfunc(model_dir, meta.task)
        run_id = run.info.run_id
    version_tags = {
        "task": meta.task,
        "kind": meta.kind,
        "objective": meta.objective,
        "backbone": meta.backbone,
        "config_hash": chash,
        "run_id": run_id,
        "dataset_versions": json.dumps(meta.dataset_versions, sort_keys=True),
        **{f"dataset_version.{k}": v for k, v in meta.dataset_versions.items()},
        **{f"metric.{k}": f"{v:.6g}" for k, v in {**final, **evaluated}.items()},
        **{k: v for k, v in tags.items() if k.startswith(("prefect.", "mlflow.source.git"))},
        **_cascade_tags(model_dir, meta),
        **_precision_tags(model_dir),
    }
    # The version is created with its tags in one write, not one round trip per tag (about 40 of them:
    # 1.3 s on a SQLite store, as many HTTP calls against a server).
    mv = register_version(f"models:/{info.model_id}", name, version_tags)
    return RegisteredVersion(task=meta.task, name=name, version=str(mv.version), run_id=run_id)


def register_version(model_uri: str, name: str, tags: Mapping[str, Any]) -> Any:
    """`mlflow.register_model` without its console lines.

    MLflow prints "Registered model ... already exists. Creating a new version ..." and "Created
    version ..." to stderr on every registration; simpair says what it registered itself, so those
    lines are dropped unless `SIMPAIR_DEBUG` is set. Errors still raise.
    """
    if os.environ.get("SIMPAIR_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):
        return mlflow.register_model(model_uri, name, tags=registry.tag_values(dict(tags)))
    with contextlib.redirect_stderr(io.StringIO()):
        return mlflow.register_model(model_uri, name, tags=registry.tag_values(dict(tags)))


def mark_challenger(home: Path, registered: RegisteredVersion) -> None:
    """Point `challenger` at a version registered by `register_trained_model`."""
    registry.set_challenger(registry.client(home), registered.name, registered.version)


@step("mark-challengers", **tracking.MLFLOW_STEP)
def mark_challengers(home: Path, registered: Sequence[RegisteredVersion]) -> list[str]:
    """Point `challenger` at every new version: called once all of a night's versions exist."""
    for item in registered:
        mark_challenger(home, item)
    return [f"{r.name}/{r.version}" for r in registered]
