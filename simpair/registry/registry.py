"""The MLflow model registry as simpair uses it: one registered model per task, aliases, not stages.

Every trained model becomes a new version with the alias `challenger`; only the promotion gate (or an
operator with a reason) moves `champion`. `resolve_model` pins an alias to a version once and
materialises that version's model directory locally, so a scoring run never changes model mid-way.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import mlflow
import yaml
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from simpair.atomic import commit
from simpair.models.composite import member_dirs
from simpair.models.metadata import MODEL_DIR_ARTIFACT
from simpair.registry import history as hist
from simpair.registry import tracking

MODEL_NAMES: dict[str, str] = {"paraphrase": "simpair-paraphrase", "sts": "simpair-sts"}
CHAMPION = "champion"
CHALLENGER = "challenger"
CACHE_DIR = "registry-cache"


class ModelNotFound(LookupError):
    """The spec names no registered model, version or alias."""


class CorruptModel(RuntimeError):
    """A registered version whose artifacts are missing or unreadable."""


@dataclass(frozen=True)
class ResolvedModel:
    """One registered version pinned and available on local disk."""

    name: str
    version: str
    run_id: str | None
    local_dir: Path
    aliases: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)


def model_name(task: str) -> str:
    """Registered model name for a task (`paraphrase` -> `simpair-paraphrase`)."""
    try:
        return MODEL_NAMES[task]
    except KeyError as exc:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(MODEL_NAMES)}") from exc


def client(home: Path) -> MlflowClient:
    """A client on the configured tracking and registry store."""
    uri = tracking.configure(home)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def parse_spec(spec: str) -> tuple[str, str | None, str | None]:
    """`name@alias`, `name/3`, `models:/name@alias` or bare `name` (= champion) -> (name, version, alias)."""
    text = spec.removeprefix("models:/").strip().strip("/")
    if "@" in text:
        name, alias = text.split("@", 1)
        return name, None, alias
    if "/" in text:
        name, version = text.rsplit("/", 1)
        if not version.isdigit():
            raise ValueError(f"model spec {spec!r}: version must be a number, got {version!r}")
        return name, version, None
    return text, None, CHAMPION


def version_for(c: MlflowClient, name: str, alias: str) -> str | None:
    """Version an alias points at, or None when the alias (or the model) does not exist."""
    try:
        return str(c.get_model_version_by_alias(name, alias).version)
    except MlflowException as exc:
        if "RESOURCE_DOES_NOT_EXIST" in str(exc.error_code) or "not found" in str(exc).lower():
            return None
        raise


def _complete(path: Path) -> bool:
    """simpair.json and weights present; for a stacked model or a cascade, in every member directory too."""
    if not (path / "simpair.json").exists():
        return False
    try:
        members = member_dirs(path)
    except ValueError:
        return False
    if members is not None:
        return all(_complete(member) for member in members)
    return any(path.glob("*.safetensors"))


def _model_dir_in(downloaded: Path) -> Path:
    """Locate the logged model directory inside a downloaded pyfunc via its MLmodel file."""
    mlmodel = downloaded / "MLmodel"
    if not mlmodel.exists():
        raise CorruptModel(f"{downloaded}: no MLmodel file")
    spec = yaml.safe_load(mlmodel.read_text())
    artifacts = spec.get("flavors", {}).get("python_function", {}).get("artifacts", {})
    entry = artifacts.get(MODEL_DIR_ARTIFACT)
    if not entry:
        raise CorruptModel(f"{mlmodel}: no '{MODEL_DIR_ARTIFACT}' artifact recorded")
    path = downloaded / entry["path"]
    if not _complete(path):
        raise CorruptModel(
            f"{path}: model directory incomplete (simpair.json or safetensors weights missing)"
        )
    return path


def download_version(c: MlflowClient, name: str, version: str, home: Path, fresh: bool = False) -> Path:
    """Model directory of a version, downloaded once into `<home>/registry-cache/<store>/<name>/<version>`."""
    store = hashlib.sha1(c.tracking_uri.encode()).hexdigest()[:8]  # versions are numbered per store
    target = home / CACHE_DIR / store / name / version
    if target.exists() and fresh:
        shutil.rmtree(target, ignore_errors=True)
    if target.exists():
        try:
            return _model_dir_in(target)
        except CorruptModel:
            shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=target.parent))
    try:
        uri = c.get_model_version_download_uri(name, version)
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(staging)))
        _model_dir_in(local)
        commit(local, target)  # `local` is `staging` or a folder inside it
    except CorruptModel:
        raise
    except MlflowException as exc:
        raise CorruptModel(f"{name} version {version}: artifacts cannot be downloaded: {exc}") from exc
    except OSError as exc:
        raise CorruptModel(f"{name} version {version}: artifacts cannot be read: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _model_dir_in(target)


def resolve_model(spec: str, home: Path, fresh: bool = False) -> ResolvedModel:
    """Pin `spec` to one version and return it with a local directory `load_predictor` accepts.

    Downloads are cached per store and version; `fresh=True` (the gate) re-downloads, so a model whose
    artifacts were lost from the store is found out even where an old local copy survives.
    """
    c = client(home)
    name, version, alias = parse_spec(spec)
    if version is None:
        assert alias is not None
        version = version_for(c, name, alias)
        if version is None:
            raise ModelNotFound(f"{name}@{alias}: no such alias (run `simpair models` to see the registry)")
    try:
        mv = c.get_model_version(name, version)
    except MlflowException as exc:
        raise ModelNotFound(f"{name} version {version}: not registered ({exc.error_code})") from exc
    local_dir = download_version(c, name, version, home, fresh=fresh)
    return ResolvedModel(
        name=name,
        version=str(mv.version),
        run_id=mv.run_id,
        local_dir=local_dir,
        aliases=tuple(mv.aliases or ()),
        tags=dict(mv.tags or {}),
    )


def ensure_registered_model(c: MlflowClient, name: str, description: str) -> None:
    """Create the registered model once (log_model would too, but without a description)."""
    try:
        c.get_registered_model(name)
    except MlflowException:
        c.create_registered_model(name, description=description)


def tag_values(tags: Mapping[str, object]) -> dict[str, str]:
    """Tag values as MLflow stores them: strings, clipped to its 5000-character limit."""
    return {key: str(value)[:5000] for key, value in tags.items()}


def tag_version(c: MlflowClient, name: str, version: str, tags: Mapping[str, object]) -> None:
    """Set several tags on an existing version (MLflow has no batch call for version tags)."""
    for key, value in tag_values(tags).items():
        c.set_model_version_tag(name, version, key, value)


def set_challenger(c: MlflowClient, name: str, version: str) -> None:
    """Point `challenger` at a newly registered version."""
    c.set_registered_model_alias(name, CHALLENGER, version)


def read_history(c: MlflowClient, name: str) -> list[hist.HistoryEntry]:
    """The champion history recorded on the registered model."""
    tags = c.get_registered_model(name).tags or {}
    return hist.parse(tags.get(hist.HISTORY_TAG))


def move_champion(
    c: MlflowClient, name: str, version: str, reason: str, by: str, action: hist.Action
) -> None:
    """Point `champion` at `version` and append the move to the history (history first, then the alias).

    Writing the history before the alias means a crash between the two leaves a history entry that
    `rollback_target` recognises as "alias moved outside simpair" rather than a silently moved alias.
    """
    c.get_model_version(name, version)  # raises if the version does not exist
    entries = read_history(c, name)
    previous = version_for(c, name, CHAMPION)
    entries.append(hist.HistoryEntry(action=action, version=version, previous=previous, reason=reason, by=by))
    c.set_registered_model_tag(name, hist.HISTORY_TAG, hist.dump(entries))
    c.set_registered_model_alias(name, CHAMPION, version)


def rollback(c: MlflowClient, name: str, reason: str = "manual rollback", by: str = "cli") -> tuple[str, str]:
    """Restore the previous champion from the history; returns (from_version, to_version)."""
    current = version_for(c, name, CHAMPION)
    if current is None:
        raise ModelNotFound(f"{name} has no champion: nothing to roll back")
    target = hist.rollback_target(read_history(c, name), current)
    move_champion(c, name, target, reason=reason, by=by, action="rollback")
    return current, target


@dataclass(frozen=True)
class RollbackOutcome:
    """What `rollback_each` did to one registered model: moved (from -> to) or why it could not."""

    name: str
    moved_from: str | None = None
    moved_to: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def rollback_each(
    c: MlflowClient, names: list[str], reason: str = "manual rollback", by: str = "cli"
) -> list[RollbackOutcome]:
    """Roll back every named model independently: one that cannot be rolled back (no champion, no earlier
    champion, registry error) is reported in its outcome and does not stop the others."""
    outcomes = []
    for name in names:
        try:
            old, new = rollback(c, name, reason=reason, by=by)
        except (LookupError, ValueError, MlflowException) as exc:
            outcomes.append(RollbackOutcome(name, error=str(exc)))
        else:
            outcomes.append(RollbackOutcome(name, moved_from=old, moved_to=new))
    return outcomes


def list_versions(c: MlflowClient, name: str) -> list:
    """All versions of a registered model, newest first (empty when it does not exist yet)."""
    try:
        versions = c.search_model_versions(f"name = '{name}'")
    except MlflowException:
        return []
    return sorted(versions, key=lambda mv: int(mv.version), reverse=True)
