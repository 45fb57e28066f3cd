"""A version's reference profile: built when it is registered or imported, shipped with it, found by scoring.

The reference is what the version's own traffic should look like: its scores, token lengths and rare
word pieces on the dev pairs it was tuned and gated on (`simpair.monitoring.profile.reference_profile`),
plus a fixed sample of dev sentence vectors for bi-encoders. It is built once, when the version
exists, and travels with it as artifacts of the version's MLflow run (`monitor/reference/`) with
`simpair.reference_profile` tags on run and version (`simpair.registry.monitoring`), so a scoring run
anywhere finds it from the pinned model alone (`simpair.monitoring.lookup.find_reference`). A copy
also stays in the model folder (`monitor/reference/`), which is where a model scored as a plain
folder keeps it.

Where it runs:
- the night: the `build-reference-profile` step, after `register-model` and before `mark-challengers`,
  on the dev split the model records (as `measure-precision` reads it);
- `simpair models import --dev FILE|DATASET/SPLIT`: on that dev file (`simpair.model_import`).
A model with no dev split has no reference: its scoring runs say so in one line and skip the drift
check (health is still recorded).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from simpair.models.metadata import ModelMetadata
from simpair.monitoring.lookup import NO_REFERENCE, REFERENCE_DIR, find_reference
from simpair.monitoring.profile import reference_profile
from simpair.registry.monitoring import attach_reference
from simpair.registry.record import RegisteredVersion
from simpair.registry.tracking import MLFLOW_STEP
from simpair.selection.precision_ladder import NoDevSplit, dev_pairs
from simpair.stages import step

log = logging.getLogger(__name__)


def _threshold(model_dir: Path) -> float | None:
    """The paraphrase threshold the version labels with; None when it has none (sts, or never chosen)."""
    meta = ModelMetadata.read(model_dir)
    if meta.task != "paraphrase" or not meta.threshold_chosen:
        return None
    return float(meta.threshold)


def build_reference(
    home: Path, model_dir: Path, name: str, version: str, run_id: str, frame: Any, source: str
) -> str:
    """Profile the version on its dev `frame`, keep it in the model folder, attach it to the version's
    run and tag run and version; returns the one line that says so."""
    model_dir = Path(model_dir)
    profile = reference_profile(model_dir, frame, _threshold(model_dir), model=name, version=version)
    folder = model_dir / REFERENCE_DIR
    shutil.rmtree(folder, ignore_errors=True)  # a rebuilt reference never keeps an older vector file
    profile.save(folder)
    attach_reference(home, name, version, run_id, folder, profile.n_pairs, source)
    return f"reference profile: {profile.n_pairs} pairs of {source}"


@step("build-reference-profile", run_name="reference-{model_dir.name}", **MLFLOW_STEP)
def build_reference_profile(home: Path, model_dir: Path, registered: RegisteredVersion) -> str | None:
    """The night's registration step for monitoring: the new version's reference on its dev split.

    Runs once the version exists (its run holds the artifacts) and before `challenger` points at it.
    Returns the one line that says what it was built on, or None for a model with no dev split (its
    scoring runs then say that drift is not checked).
    """
    try:
        source, frame = dev_pairs(Path(model_dir), Path(home))
    except NoDevSplit as exc:
        log.warning("no reference profile for %s: %s; %s", Path(model_dir).name, exc, NO_REFERENCE)
        return None
    line = build_reference(
        Path(home), Path(model_dir), registered.name, registered.version, registered.run_id, frame, source
    )
    print(f"nightly: {registered.name} v{registered.version}: {line}")
    return line


__all__ = ["NO_REFERENCE", "REFERENCE_DIR", "build_reference", "build_reference_profile", "find_reference"]
