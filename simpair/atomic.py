"""Atomic writes: build a file or folder under a temporary name beside its target, then rename it in.

A reader, or a crash, sees the previous version or the new one, never half of one. Every module
that writes something another process may read at the same time goes through here:

- `atomic_path(target)`: a context manager giving a fresh temporary path (a file path, or an empty
  folder with `directory=True`) in the target's folder; on success it is renamed over the target,
  on any error it is removed.
- `commit(tmp, target)`: that rename, for a temporary the caller made itself (e.g. `mkdtemp`).
- `atomic_write_bytes`, `atomic_write_text`: the one-call forms.

Temporary names start with `.` (or the given `prefix`), so inbox listers and dataset readers that
skip hidden names never see them. `durable=True` also fsyncs the data and the folder around the
rename, for writes that must survive a power cut, not only a crash of the writer.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def temp_path(target: Path, prefix: str = ".") -> Path:
    """A unique name for a temporary of `target` in the same folder (so the rename is atomic)."""
    return target.with_name(f"{prefix}{target.name}.tmp-{uuid.uuid4().hex}")


def fsync_path(path: Path) -> None:
    """Flush a file's or a folder's entry to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def commit(tmp: Path, target: Path, *, durable: bool = False) -> None:
    """Rename `tmp` over `target`; an existing target folder is swapped out, then deleted.

    A folder target is replaced in two renames (old out of the way, new in), so readers see the old
    or the new folder, and only for the instant between them neither.
    """
    tmp, target = Path(tmp), Path(target)
    if durable:
        fsync_path(tmp)
    if tmp.is_dir() and target.is_dir() and any(target.iterdir()):
        old = temp_path(target, prefix=".old-")
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)
    if durable:
        fsync_path(target.parent)


@contextmanager
def atomic_path(
    target: str | Path, *, directory: bool = False, durable: bool = False, prefix: str = "."
) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success rename it over `target`, on error remove it.

    With `directory=True` the temporary is an empty folder to fill; otherwise it is a path to write a
    file at (nothing is created). The target's parent folder is created if missing.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(target, prefix)
    if directory:
        tmp.mkdir()
    try:
        yield tmp
        commit(tmp, target, durable=durable)
    finally:
        if tmp.exists() or tmp.is_symlink():
            _remove(tmp)


def atomic_write_bytes(target: str | Path, data: bytes, *, durable: bool = False, prefix: str = ".") -> Path:
    """Write `data` to `target` atomically; returns the target."""
    with atomic_path(target, durable=durable, prefix=prefix) as tmp:
        tmp.write_bytes(data)
    return Path(target)


def atomic_write_text(
    target: str | Path, text: str, *, durable: bool = False, prefix: str = ".", encoding: str = "utf-8"
) -> Path:
    """Write `text` to `target` atomically; returns the target."""
    return atomic_write_bytes(target, text.encode(encoding), durable=durable, prefix=prefix)
