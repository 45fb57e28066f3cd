"""Where a training starts from: a hub id or local backbone, the tiny test model, or a parent model.

A parent is a simpair model directory (intermediate training, e.g. STS-B then MSRP; or `home:NAME`,
the newest `<home>/models/NAME-*`); its metadata carries the lineage the new model inherits.
"""

from __future__ import annotations

from pathlib import Path

from simpair.models.metadata import METADATA_FILE, ModelMetadata
from simpair.models.tiny import default_backbone
from simpair.training.config import TrainConfig


def resolve_backbone(config: TrainConfig, home: Path) -> tuple[str, ModelMetadata | None]:
    """(name or path, parent metadata if the backbone is a simpair model directory)."""
    name = config.backbone or default_backbone()
    if name == "tiny":
        return name, None
    if name.startswith("home:"):  # newest model of a run name under <home>/models (chained nightly runs)
        prefix = name.removeprefix("home:")
        found = [p for p in (home / "models").glob(f"{prefix}-*") if (p / METADATA_FILE).is_file()]
        if not found:
            raise ValueError(f"backbone {name}: no trained model {prefix}-* under {home / 'models'}")
        name = str(max(found, key=lambda p: (p / METADATA_FILE).stat().st_mtime))
    meta_path = Path(name) / METADATA_FILE
    if meta_path.is_file():
        parent = ModelMetadata.read(Path(name))
        if parent.kind == "stacked":
            raise ValueError(f"backbone {name} is a stacked ensemble; train from one of its members")
        # A bi-encoder's weights are a plain encoder, so a cross-encoder can start from one (a new
        # head on top) and the other way round: the STS knowledge of the parent carries over.
        return name, parent
    return name, None
