"""MLflow's side of monitoring: the reference profile shipped with a version, and the monitoring runs.

A version's reference profile (`simpair.monitoring`) is logged as artifacts of the version's own run
under `monitor/reference/`, and the run and the version carry `simpair.reference_profile` tags, so a
scoring run finds it from the pinned model alone (`download_reference`), whichever machine registered
it. Each scoring run's drift check is logged as a run of its own in the `simpair-monitoring`
experiment, tagged with the model name, version and scoring run id, so a version's drift figures line
up night after night in the MLflow UI. This module only moves files, tags and metrics: it never reads
a profile's content (that is `simpair.monitoring`'s job).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import mlflow
from mlflow.exceptions import MlflowException

from simpair.registry import registry, tracking

REFERENCE_ARTIFACT = "monitor/reference"  # where a version's run keeps its reference profile
REFERENCE_TAG = "simpair.reference_profile"  # "1" on the run and the version that carry one
REFERENCE_PAIRS_TAG = "simpair.reference_profile.pairs"
REFERENCE_SOURCE_TAG = "simpair.reference_profile.source"  # the dev split or file it was built from
MONITOR_EXPERIMENT = "simpair-monitoring"


def attach_reference(
    home: Path, name: str, version: str, run_id: str, folder: Path, pairs: int, source: str
) -> None:
    """Log the reference profile in `folder` on the version's run and tag run and version with it."""
    c = registry.client(home)
    c.log_artifacts(run_id, str(folder), artifact_path=REFERENCE_ARTIFACT)
    tags = {REFERENCE_TAG: "1", REFERENCE_PAIRS_TAG: str(pairs), REFERENCE_SOURCE_TAG: source[:500]}
    for key, value in tags.items():
        c.set_tag(run_id, key, value)
    registry.tag_version(c, name, version, tags)


def download_reference(home: Path, run_id: str, dest: Path) -> Path | None:
    """The version's reference profile folder, downloaded into `dest`; None when its run has none.

    `dest` is replaced whole and only once the download is complete, so a killed download never leaves
    half a profile that a later run would read.
    """
    c = registry.client(home)
    try:
        run = c.get_run(run_id)
    except MlflowException:
        return None
    if run.data.tags.get(REFERENCE_TAG) != "1":
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".reference-", dir=dest.parent))
    try:
        local = Path(
            mlflow.artifacts.download_artifacts(
                run_id=run_id, artifact_path=REFERENCE_ARTIFACT, dst_path=str(staging),
                tracking_uri=c.tracking_uri,
            )
        )  # fmt: skip
        shutil.rmtree(dest, ignore_errors=True)
        local.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def log_monitoring_run(
    home: Path,
    name: str,
    version: str,
    scoring_run_id: str,
    metrics: Mapping[str, float],
    artifacts: Iterable[Path] = (),
    tags: Mapping[str, str] | None = None,
) -> str:
    """One MLflow run holding a scoring run's drift figures and report; returns its run id."""
    experiment_id = tracking.ensure_experiment(home, MONITOR_EXPERIMENT)
    run_tags = tracking.run_tags(
        None,
        {
            "simpair.model_name": name,
            "simpair.model_version": version,
            "simpair.scoring_run_id": scoring_run_id,
            **dict(tags or {}),
        },
    )
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=f"monitor-{name}-{version}-{scoring_run_id}", tags=run_tags
    ) as run:
        tracking.log_numeric_metrics(dict(metrics))
        tracking.log_artifacts(artifacts, artifact_path="monitor")
        return run.info.run_id
