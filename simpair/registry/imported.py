"""Register a model the team already has (`simpair models import`) as a version like any trained one.

`simpair.model_import` adopts the source and fits it on a dev file; this module registers the staged
folder under the task's name (`simpair-paraphrase`, `simpair-sts`) with its provenance as version
tags: origin `imported`, the source path or hub id and revision, the content hash of its files, the
date, its threshold (or `none`) and precision verdict. A registered model with no champion yet takes
it as `champion` (a team starts with the model it has and lets the night try to beat it); otherwise
it becomes `challenger`, unless the caller says otherwise. The gate needs nothing more: it
re-evaluates champion and challenger on the same evaluation splits whatever their origin.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import mlflow

from simpair.models.foreign import content_sha256, link_or_copy
from simpair.models.metadata import METADATA_FILE, ModelMetadata
from simpair.models.precision_verdict import PrecisionVerdict
from simpair.registry import registry, tracking
from simpair.registry.pyfunc import log_pyfunc
from simpair.registry.record import DESCRIPTIONS, register_version
from simpair.registry.registry import CHALLENGER, CHAMPION

Alias = Literal["auto", "champion", "challenger", "none"]
ALIASES: tuple[str, ...] = ("auto", "champion", "challenger", "none")
MOVED_ALIASES: tuple[str, ...] = ("champion", "challenger", "none")


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
    reference: str | None = None  # the reference profile built on the dev file (drift checks), one line

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
                "no dev file: no threshold (probability only, label left empty); auto precision is fp32; "
                "no reference profile: drift is not checked"
            )
        else:
            shown = ", ".join(
                f"{k} {v:.4f}" for k, v in self.dev_metrics.items() if k in ("accuracy", "f1", "spearman")
            )
            threshold = f"threshold {self.threshold:.4f}, " if self.threshold is not None else ""
            out.append(f"dev {self.dev}: {threshold}{shown}")
            out.append(f"precision verdict: {self.precision}")
            if self.reference:
                out.append(self.reference)
        return out


def stage(model_dir: Path, staging: Path, *, hardlink: bool = True) -> Path:
    """A copy of the model folder to register: weights hard-linked, small files copied (rewritten later).

    Never a symlink: MLflow refuses to log an artifact that resolves outside the folder, so weights
    that cannot be hard-linked (another filesystem; `hardlink=False`) are copied, and symlinks already
    in an adopted folder (its own fallback) are replaced by their targets' bytes.
    """

    def place(src: str, dst: str) -> None:
        if src.endswith(".safetensors"):
            link_or_copy(Path(src), Path(dst), hardlink=hardlink)
        else:
            shutil.copy2(src, dst)  # follows a symlink: the target's bytes

    shutil.copytree(model_dir, staging, symlinks=False, copy_function=place)
    return staging


def provenance_of(model_dir: Path, source: str) -> dict[str, Any]:
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


def register_imported(
    home: Path,
    staged: Path,
    source: str,
    *,
    name: str | None = None,
    alias: str = CHALLENGER,
    dev: str | None = None,
    dev_metrics: dict[str, float] | None = None,
) -> ImportResult:
    """Register a staged imported model folder as a version and move `alias` to it ("none": no alias).

    Which alias a new import takes is decided by the caller (`simpair.model_import`).
    """
    if alias not in MOVED_ALIASES:
        raise ImportRefused(f"alias must be one of {', '.join(MOVED_ALIASES)}, got {alias!r}")
    meta = ModelMetadata.read(staged)
    provenance = dict(meta.imported or {})
    name = name or registry.model_name(meta.task)
    verdict = PrecisionVerdict.read(staged)
    run_id, version = _register(home, staged, meta, name, provenance, dev_metrics or {})
    c = registry.client(home)
    previous = registry.version_for(c, name, CHAMPION)
    chosen = alias
    if chosen == CHAMPION:
        reason = f"imported from {provenance.get('source', source)}"
        registry.move_champion(c, name, version, reason=reason, by="import", action="promote")
    elif chosen == CHALLENGER:
        registry.set_challenger(c, name, version)
    return ImportResult(
        name=name,
        version=version,
        run_id=run_id,
        task=meta.task,
        kind=meta.kind,
        source=str(provenance.get("source", source)),
        content_sha256=str(provenance.get("content_sha256", "")),
        alias=None if chosen == "none" else chosen,
        previous_champion=previous,
        threshold=float(meta.threshold) if meta.threshold_chosen and meta.task == "paraphrase" else None,
        dev=dev,
        dev_metrics=dict(dev_metrics or {}),
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
    mv = register_version(f"models:/{info.model_id}", name, version_tags)
    return run_id, str(mv.version)
