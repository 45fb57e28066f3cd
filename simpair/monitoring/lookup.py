"""Where a scoring run finds its version's reference profile (`simpair.monitoring.reference` builds it).

Apart from the builder, which needs MLflow to attach and tag artifacts: a scoring run looks in its own
output folder and the model folder first, and imports MLflow only when the profile must be
downloaded from the version's run (importing it cost about 4 s of a 20-pair `simpair score`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from simpair.monitoring.profile import PROFILE_FILE, Profile
from simpair.runtime.model_ref import ModelRef

log = logging.getLogger(__name__)

REFERENCE_DIR = Path("monitor") / "reference"  # inside a model folder: the version's reference, local copy
NO_REFERENCE = "no reference profile: drift is not checked"


def find_reference(model: ModelRef, home: Path | None, cache: Path) -> Profile | None:
    """The pinned model's reference profile, or None when it has none.

    Looked for in `cache` (the scoring output's copy, so later runs and `simpair monitor` read it
    without MLflow), then in the model folder (`monitor/reference/`), then among the artifacts of the
    version's MLflow run; what is found is copied into `cache`.
    """
    if (cache / PROFILE_FILE).is_file():
        return Profile.load(cache)
    local = Path(model.local_dir) / REFERENCE_DIR
    if (local / PROFILE_FILE).is_file():
        profile = Profile.load(local)
    elif home is not None and model.run_id and not model.version.startswith("local-"):
        try:
            from simpair.registry.monitoring import download_reference  # MLflow: only to download it

            folder = download_reference(Path(home), model.run_id, cache)
        except Exception as exc:  # the store is down or the artifacts are gone: score on, say so
            log.warning("reference profile of %s not downloaded: %s", model.label, exc)
            return None
        return Profile.load(folder) if folder is not None else None
    else:
        return None
    profile.save(cache)
    return profile
