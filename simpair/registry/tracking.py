"""MLflow tracking: where runs go and what every training or gate run records.

One function per concern so the nightly flow, the CLI and the tests all log the same things: the whole
validated config as params, per-epoch and final metrics, artifacts, the input datasets (Parquet source
plus digest = dataset version, via `mlflow.data`), the git commit, and the flow-run tags passed in by the
caller (this module never imports Prefect; `tasks/registry.py` reads the run context and hands it over).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient

from simpair import settings
from simpair.registry.parquet_dataset import ParquetSplit
from simpair.stages import step

EXPERIMENT = "simpair"
# Environment knobs that keep a dead tracking server from hanging a run for minutes inside MLflow's own
# HTTP retry loop: Prefect's task retries (with backoff) are the one retry policy an operator tunes.
# Artifact progress bars are off too: they interleave with the pipeline's own progress and logs.
_HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}


# How a step that talks to MLflow retries: three times, after 10 s, 1 min and 5 min (a tracking server
# restarting), transient faults only (`simpair.registry.faults`), or the nightly profile's retries.
MLFLOW_STEP: dict[str, Any] = {
    "tags": ("mlflow",),
    "retries": 3,
    "retry_delay_seconds": (10.0, 60.0, 300.0),
    "transient_only": True,
    "profile_retries": True,
}


class TrackingUnavailable(RuntimeError):
    """The tracking server or store cannot be reached (a transient fault worth retrying)."""


@dataclass(frozen=True)
class DatasetRef:
    """One input split of a run: Parquet path plus the ingest version that names its content."""

    dataset: str
    split: str
    version: str
    path: Path
    context: str = "training"  # "training" | "validation" | "evaluation" (mlflow.log_input context)


def configure(home: Path) -> str:
    """Point MLflow at `$MLFLOW_TRACKING_URI` or the embedded SQLite store under `home`; return the URI.

    The embedded store keeps artifacts in `<home>/mlflow/artifacts`, not in `./mlruns` of whatever
    directory the command ran from.
    """
    for key, value in _HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    uri = settings.tracking_uri(home)
    if uri.startswith("sqlite:"):
        settings.artifact_root(home).mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return uri


def ensure_experiment(home: Path, name: str = EXPERIMENT) -> str:
    """Create (once) and return the experiment id; raises TrackingUnavailable if the store is down."""
    uri = configure(home)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    try:
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        location = settings.artifact_root(home).as_uri() if uri.startswith("sqlite:") else None
        return client.create_experiment(name, artifact_location=location)
    except Exception as exc:  # connection refused, timeouts, locked database
        raise TrackingUnavailable(f"MLflow tracking store {uri} is not reachable: {exc}") from exc


@step("check-tracking", **MLFLOW_STEP)
def check_reachable(home: Path) -> str:
    """Fail fast (TrackingUnavailable) before anything is written when the tracking store is down."""
    ensure_experiment(home)
    return settings.tracking_uri(home)


def git_commit(repo: Path | None = settings.CHECKOUT) -> str | None:
    """The checkout's commit (suffixed `-dirty` when the tree has changes); None outside git.

    Installed from a wheel there is no checkout (None): a git repository that merely holds the
    virtual environment is not simpair's source and must not be recorded as its commit.
    """
    if repo is None:
        return None
    try:
        sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


def config_hash(config: Mapping[str, Any]) -> str:
    """Stable 12-hex digest of a config: same settings, same hash, whatever the key order."""
    canonical = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> `a.b.c` params (MLflow params are flat strings of at most 6000 chars)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, prefix=f"{name}."))
        else:
            text = json.dumps(value, default=str) if isinstance(value, list | tuple) else str(value)
            out[name] = text[:6000]
    return out


def log_history(history: Iterable[Mapping[str, Any]]) -> int:
    """Per-epoch (or per-eval-step) metrics; each row's `epoch` or `step` becomes the MLflow step.

    Nested values (`{"dev": {"f1": ...}}`) become `dev/f1`, so dev curves sit next to the loss.
    """
    count = 0
    for index, row in enumerate(history):
        step = int(row.get("step", row.get("epoch", index)))
        numbers = {
            _metric_key(k): v
            for k, v in flatten_metrics({k: v for k, v in row.items() if k not in {"step", "epoch"}}).items()
        }
        if numbers:
            mlflow.log_metrics(numbers, step=step)
            count += 1
    return count


def flatten_metrics(metrics: Mapping[str, Any], prefix: str = "", sep: str = "/") -> dict[str, float]:
    """Nested evaluation results -> flat `a/b/metric` floats (non-numeric leaves dropped)."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_metrics(value, prefix=f"{name}{sep}", sep=sep))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)  # NaN kept: "undefined" (e.g. Spearman of constant scores) is news
    return out


def log_numeric_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Log every numeric leaf of a (possibly nested) metrics dict as `a.b.metric`; return what was logged."""
    flat = {_metric_key(k): v for k, v in flatten_metrics(metrics, sep=".").items()}
    if flat:
        mlflow.log_metrics(flat)
    return flat


def _metric_key(name: str) -> str:
    """MLflow metric names allow `/`, `.`, `-`, `_`, spaces and alphanumerics; replace anything else."""
    return "".join(ch if ch.isalnum() or ch in "/._- " else "_" for ch in name)


def log_datasets(refs: Iterable[DatasetRef]) -> int:
    """Record each input split with `mlflow.data` so the run's lineage names the exact Parquet version.

    Only the Parquet footer is read (`ParquetSplit`): registering a model trained on millions of pairs
    costs the same as on thousands, where `mlflow.data.from_pandas` would load the whole split and
    infer its schema value by value.
    """
    count = 0
    for ref in refs:
        dataset = ParquetSplit(ref.path, name=f"{ref.dataset}-{ref.split}", digest=ref.version[:36] or None)
        mlflow.log_input(dataset, context=ref.context, tags={"dataset_version": ref.version})
        count += 1
    return count


def log_artifacts(paths: Iterable[Path], artifact_path: str | None = None) -> int:
    """Log files (plots, reports, metrics.json, config, dev pair ids) that exist; skip missing ones."""
    count = 0
    for path in paths:
        path = Path(path)
        if path.is_file():
            mlflow.log_artifact(str(path), artifact_path=artifact_path)
            count += 1
        elif path.is_dir():
            mlflow.log_artifacts(str(path), artifact_path=artifact_path)
            count += 1
    return count


def run_tags(
    flow_tags: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Tags every simpair run carries: code version plus who made it (flow run id/name when orchestrated)."""
    tags = {"simpair.source": "simpair"}
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    for source in (flow_tags or {}, extra or {}):
        tags.update({k: str(v) for k, v in source.items() if v is not None})
    return tags
