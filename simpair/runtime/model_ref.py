"""Resolve a model spec once to one pinned model: a saved model folder or a registry reference.

Every command that takes a model (`simpair score --model`, `simpair evaluate/predict/stack --model`)
goes through `resolve_model_ref`: a folder holding `simpair.json` is used as it is (its version is a
hash of its files); a folder saved by sentence-transformers or transformers, or a hub id already in the
local Hugging Face cache, is adopted once as a simpair model folder under `<home>/imported/`
(`simpair.models.foreign`) and then used as one; anything else is `name@alias` / `name/version` in
the MLflow registry, pinned to one version and downloaded once. Scoring runs then load the pinned
directory, never the alias, so moving `champion` mid-run (a promotion by the nightly retrain) cannot
mix two versions in one run. The registry (MLflow) is imported only when a spec needs it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simpair.stages import step

DEFAULT_MODEL = "simpair-paraphrase@champion"
METADATA_FILE = "simpair.json"


class NoModel(LookupError):
    """A spec (or its default) that names no usable model."""


@dataclass(frozen=True)
class ModelRef:
    """A pinned model: registry name and version (or a local directory's name and content hash)."""

    name: str
    version: str
    run_id: str
    local_dir: str
    task: str
    kind: str

    @property
    def label(self) -> str:
        return f"{self.name}/{self.version}"


def _local_version(model_dir: Path) -> str:
    """A stable version for an unregistered directory: hash of its metadata and weights' sizes/names.

    Cheap (no full read of the weights) yet changes whenever the model is re-saved with new weights
    (safetensors files change size or metadata; simpair.json carries created_at).
    """
    digest = hashlib.sha256()
    for path in sorted(model_dir.iterdir()):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(str(path.stat().st_size).encode())
            if path.suffix in {".json", ".yaml"}:
                digest.update(path.read_bytes())
    return "local-" + digest.hexdigest()[:12]


def _read_kind_task(model_dir: Path) -> tuple[str, str]:
    meta = json.loads((model_dir / METADATA_FILE).read_text(encoding="utf-8"))
    return str(meta.get("task", "paraphrase")), str(meta.get("kind", "cross"))


def is_model_dir(path: Path) -> bool:
    """A saved model folder (any kind: plain, soup, stack): it holds `simpair.json`."""
    return path.is_dir() and (path / METADATA_FILE).is_file()


def latest_model_dir(home: Path) -> Path:
    """The most recently saved model under `<home>/models`."""
    models = [p for p in (home / "models").glob("*") if is_model_dir(p)]
    if not models:
        raise NoModel(f"no trained model under {home / 'models'}; pass --model DIR")
    return max(models, key=lambda p: (p / METADATA_FILE).stat().st_mtime)


def local_model_ref(model_dir: Path) -> ModelRef:
    """Pin a saved model folder as it is now."""
    model_dir = model_dir.expanduser().resolve()
    task, kind = _read_kind_task(model_dir)
    return ModelRef(model_dir.name, _local_version(model_dir), "", str(model_dir), task, kind)


def adopt_foreign(spec: str, home: Path, task: str | None = None) -> Path:
    """The simpair model folder of a sentence-transformers/transformers folder or cached hub id.

    Made once under `<home>/imported/` (weights linked, not copied) and found again on later runs;
    `task` (paraphrase | sts) defaults to what the model is: a classifier decides paraphrase, an
    embedding model's cosine is graded similarity. Raises `NoModel` with one line saying why not.
    """
    from simpair.models.foreign import ForeignModelError, adopt

    try:
        return adopt(spec, home, task=task)
    except ForeignModelError as exc:
        raise NoModel(str(exc)) from None


def looks_like_path(spec: str) -> bool:
    """A spec written as a path (`/x`, `./x`, `../x`, `~/x`, `a/b/c`), never a registry name or hub id."""
    if spec.startswith("models:/") or "://" in spec:
        return False
    return spec.startswith(("/", "./", "../", "~")) or spec.count("/") >= 2


@step("resolve-model", retries=2, retry_delay_seconds=5)
def resolve_model_ref(
    spec: str | None,
    home: Path,
    *,
    when_none: Literal["champion", "latest"] = "champion",
    task: str | None = None,
) -> ModelRef:
    """A saved model folder, a foreign model folder or cached hub id, or `name@alias` / `name/version`
    through the MLflow registry, pinned.

    No spec means the paraphrase champion (`DEFAULT_MODEL`), or with `when_none="latest"` the most
    recently saved model under `<home>/models` (what the training commands default to). `task` is the
    task a foreign model is adopted for (default: what it is, see `adopt_foreign`); a simpair folder
    or registered version already says its own. Raises a `LookupError` (`NoModel`, or the registry's
    `ModelNotFound`) when nothing matches.
    """
    if spec is None and when_none == "latest":
        return local_model_ref(latest_model_dir(home))
    spec = spec or DEFAULT_MODEL
    candidate = Path(spec).expanduser()
    if is_model_dir(candidate):
        return local_model_ref(candidate)
    from simpair.models.foreign import looks_like_hub_id  # light: no torch, no transformers

    if candidate.is_dir() or looks_like_hub_id(spec):
        return local_model_ref(adopt_foreign(spec, home, task))
    if looks_like_path(spec):
        what = "a file, not a model folder" if candidate.exists() else "no such folder"
        raise NoModel(f"{spec}: {what} (a model is a folder, name@alias or name/version)")
    from simpair.registry import resolve_model  # the registry (MLflow) only when asked for

    resolved = resolve_model(spec, home)
    model_dir = Path(resolved.local_dir)
    task, kind = _read_kind_task(model_dir)
    return ModelRef(
        name=str(resolved.name),
        version=str(resolved.version),
        run_id=str(resolved.run_id or ""),
        local_dir=str(model_dir),
        task=task,
        kind=kind,
    )
