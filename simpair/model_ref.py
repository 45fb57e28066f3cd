"""Pin the model of a run: resolve `--model` once, before any chunk is scored.

Every chunk of the run then loads the pinned directory, never the alias, so moving `champion`
mid-run (a promotion by the nightly retrain) cannot mix two versions in one run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "simpair-paraphrase@champion"


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
    meta = json.loads((model_dir / "simpair.json").read_text(encoding="utf-8"))
    return str(meta.get("task", "paraphrase")), str(meta.get("kind", "cross"))


def resolve_model_spec(spec: str | None, home: Path) -> ModelRef:
    """`name@alias` or `name/version` through the MLflow registry, or a saved model directory."""
    spec = spec or DEFAULT_MODEL
    candidate = Path(spec).expanduser()
    if candidate.is_dir() and (candidate / "simpair.json").exists():
        model_dir = candidate.resolve()
        task, kind = _read_kind_task(model_dir)
        return ModelRef(model_dir.name, _local_version(model_dir), "", str(model_dir), task, kind)
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
