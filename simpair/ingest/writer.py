"""Atomic writes: a reader sees the previous version or the new one, never half of one.

A version is written into a hidden temporary folder beside its final place and renamed into place
in one `os.replace` (`simpair.atomic`); `CURRENT` is switched the same way afterwards. A crash at
any point leaves either a stray `.tmp-*` folder (removed by the next run) or a complete version.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from simpair.atomic import atomic_path, atomic_write_bytes, fsync_path

TMP_PREFIX = ".tmp-"


def write_parquet(table: pa.Table, path: Path) -> None:
    """zstd Parquet, flushed to disk before the caller renames anything that points at it."""
    pq.write_table(table, path, compression="zstd")
    fsync_path(path)


def atomic_write_parquet(table: pa.Table, path: Path) -> None:
    with atomic_path(path, durable=True, prefix=TMP_PREFIX) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def write_version(dataset_dir: Path, version: str, files: dict[str, Path], manifest: dict[str, Any]) -> Path:
    """Move the files of one version (written on the same disk) into a folder, then the folder into
    place; manifest.json goes last."""
    final = dataset_dir / version
    with atomic_path(final, directory=True, durable=True, prefix=TMP_PREFIX) as tmp:
        for name, path in files.items():
            os.replace(path, tmp / name)
            fsync_path(tmp / name)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return final


def set_current(dataset_dir: Path, version: str) -> None:
    atomic_write_bytes(dataset_dir / "CURRENT", f"{version}\n".encode(), durable=True, prefix=TMP_PREFIX)


def remove_leftovers(folder: Path) -> int:
    """Delete temporary files/folders an interrupted run left behind; returns how many."""
    if not folder.is_dir():
        return 0
    removed = 0
    for entry in folder.iterdir():
        if entry.name.startswith(TMP_PREFIX):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed += 1
    return removed
