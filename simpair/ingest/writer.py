"""Atomic writes: a reader sees the previous version or the new one, never half of one.

A version is written into a hidden temporary folder beside its final place and renamed into place
in one `os.replace`; `CURRENT` is switched the same way afterwards. A crash at any point leaves
either a stray `.tmp-*` folder (removed by the next run) or a complete version.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

TMP_PREFIX = ".tmp-"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_parquet(table: pa.Table, path: Path) -> None:
    """zstd Parquet, flushed to disk before the caller renames anything that points at it."""
    pq.write_table(table, path, compression="zstd")
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}-{uuid.uuid4().hex}")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_parquet(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}-{uuid.uuid4().hex}")
    try:
        write_parquet(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_version(
    dataset_dir: Path, version: str, tables: dict[str, pa.Table], manifest: dict[str, Any]
) -> Path:
    """Write all files of one version, then move the folder into place; manifest.json goes last."""
    dataset_dir.mkdir(parents=True, exist_ok=True)
    final = dataset_dir / version
    tmp = dataset_dir / f"{TMP_PREFIX}{version}-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        for name, table in tables.items():
            write_parquet(table, tmp / name)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        _fsync_dir(tmp)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(dataset_dir)
    return final


def set_current(dataset_dir: Path, version: str) -> None:
    atomic_write_bytes(dataset_dir / "CURRENT", f"{version}\n".encode())


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
