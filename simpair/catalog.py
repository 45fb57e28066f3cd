"""Read-side of ingest: which datasets exist, their current versions, splits and leakage.

Every later stage (training, evaluation, scoring) finds its data through this class, never by
building paths itself, so the home layout can change in one place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

LEAKAGE_COLUMNS = ["dataset", "split", "pair_id", "pair_key", "train_dataset", "train_split", "train_pair_id"]


class CatalogError(LookupError):
    """A dataset, version or split that is not in the pipeline home; the message says what exists."""


def datasets_root(home: Path) -> Path:
    return Path(home) / "datasets"


def leakage_path(home: Path) -> Path:
    return Path(home) / "leakage" / "leakage.parquet"


class Catalog:
    """Ingested datasets under `<home>/datasets/<dataset>/<version>/`, read-only."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.root = datasets_root(self.home)

    def datasets(self) -> list[str]:
        """Datasets that have a current version, in name order."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "CURRENT").is_file())

    def current_version(self, dataset: str) -> str:
        current = self.root / dataset / "CURRENT"
        if not current.is_file():
            raise CatalogError(
                f"dataset {dataset!r} has not been ingested into {self.home} "
                f"(known: {self.datasets()}); run `simpair ingest`"
            )
        return current.read_text().strip()

    def version_dir(self, dataset: str, version: str | None = None) -> Path:
        version = version or self.current_version(dataset)
        path = self.root / dataset / version
        if not (path / "manifest.json").is_file():
            raise CatalogError(f"dataset {dataset!r} has no complete version {version!r} under {self.root}")
        return path

    def versions(self, dataset: str) -> list[str]:
        """All complete versions of a dataset (the current one among them), oldest first."""
        folder = self.root / dataset
        if not folder.is_dir():
            return []
        done = [p for p in folder.iterdir() if (p / "manifest.json").is_file()]
        return [p.name for p in sorted(done, key=lambda p: (p / "manifest.json").stat().st_mtime)]

    def manifest(self, dataset: str, version: str | None = None) -> dict[str, Any]:
        """Counts, source hashes and contract version recorded when the version was written."""
        return json.loads((self.version_dir(dataset, version) / "manifest.json").read_text())

    def splits(self, dataset: str) -> dict[str, str]:
        """Split name -> role ("train" | "dev" | "test") of the current version."""
        return {info["split"]: info["role"] for info in self.manifest(dataset)["splits"]}

    def split_path(self, dataset: str, split: str, version: str | None = None) -> Path:
        folder = self.version_dir(dataset, version)
        path = folder / f"{split}.parquet"
        if not path.is_file():
            known = sorted(p.stem for p in folder.glob("*.parquet") if p.stem != "quarantine")
            raise CatalogError(
                f"dataset {dataset!r} version {folder.name} has no split {split!r} (has {known})"
            )
        return path

    def read_split(self, dataset: str, split: str, version: str | None = None) -> pl.DataFrame:
        """Clean pairs of one split in the canonical schema (`simpair.schema.PAIR_SCHEMA`)."""
        return pl.read_parquet(self.split_path(dataset, split, version))

    def quarantine(self, dataset: str, version: str | None = None) -> pl.DataFrame:
        """Rejected raw records with file, line, reason (`simpair.schema.QUARANTINE_SCHEMA`)."""
        return pl.read_parquet(self.version_dir(dataset, version) / "quarantine.parquet")

    def leakage(self) -> pl.DataFrame:
        """Evaluation pairs that also sit in a training split, one row per (eval pair, train pair)."""
        path = leakage_path(self.home)
        if not path.is_file():
            raise CatalogError(f"no leakage report at {path}; run `simpair ingest`")
        return pl.read_parquet(path)
