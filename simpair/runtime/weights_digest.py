"""A digest of a model folder's bytes: what the graph cache and the embedding store key their files by.

A registry version names a model, but a folder's version is only a hash of file sizes: the bytes make
sure two models that happen to share name and version never share graphs or vectors. Hashing a
stack's two 90 MB weight files took 0.4 s, and each member's again for its graph-cache entry, about
0.7 s of every fresh `simpair score` (2 cores, 2026-11-29). So each file's digest is kept:

- in the process, per (path, size, mtime);
- across processes, beside the graph cache (`<graph cache>/file-digests/`), with the file's size and
  modification time, and used again only while both are unchanged (the rule `make` relies on). A
  cache that is off or cannot be written only costs the hashing.

The folder's digest is then the digest of its files' names and digests, in name order. What is
written into a model folder after training is not the model and is skipped: the precision verdict
(re-measured on a new host or runtime: its graphs must stay the ones just built), the reference
profile under `monitor/`, and anything under a hidden folder (a `.graph-cache` an older release left
inside a stack). A memo is not written for a file modified in the last `RACY_NS` (Git's "racy" rule:
a same-size rewrite within the clock's tick would keep its time).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from functools import lru_cache
from pathlib import Path

from simpair.atomic import atomic_write_text
from simpair.models.precision_verdict import VERDICT_FILE

WEIGHT_SUFFIXES = {".safetensors", ".bin", ".pt", ".pth", ".onnx", ".json"}
NOT_THE_MODEL = {VERDICT_FILE}  # file names written into a model folder after training
NOT_THE_MODEL_DIRS = {"monitor"}  # the reference profile (`simpair.monitoring.lookup.REFERENCE_DIR`)
MEMO_FOLDER = "file-digests"
RACY_NS = 2 * 10**9


def weights_digest(model_dir: str | Path, cache: Path | None = None) -> str:
    """Digest of the model's weight and config files (names and bytes), every member's included.

    `cache`: the graph cache folder whose `file-digests/` keeps each file's digest (None: none kept).
    """
    root = Path(model_dir)
    memo = str(cache / MEMO_FOLDER) if cache is not None else None
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.suffix not in WEIGHT_SUFFIXES or not _the_models(relative) or not path.is_file():
            continue
        stat = path.stat()
        digest.update(relative.as_posix().encode())
        digest.update(file_digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns, memo).encode())
    return digest.hexdigest()


@lru_cache(maxsize=256)
def file_digest(path: str, size: int, mtime_ns: int, memo_folder: str | None = None) -> str:
    """blake2b of one file's bytes, from the memo in `memo_folder` while its size and mtime are unchanged."""
    memo = (
        Path(memo_folder) / f"{hashlib.sha256(path.encode()).hexdigest()[:32]}.json" if memo_folder else None
    )
    if memo is not None:
        try:
            kept = json.loads(memo.read_text(encoding="utf-8"))
            if kept.get("path") == path and kept.get("size") == size and kept.get("mtime_ns") == mtime_ns:
                return str(kept["digest"])
        except (OSError, ValueError, KeyError, AttributeError):
            pass  # none yet, or unreadable: hash the file
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    value = digest.hexdigest()
    after = os.stat(path)  # rewritten while it was read (a coarse mtime may not show it): not kept
    unchanged = (after.st_size, after.st_mtime_ns) == (size, mtime_ns)
    if memo is not None and unchanged and time.time_ns() - mtime_ns >= RACY_NS:
        record = {"path": path, "size": size, "mtime_ns": mtime_ns, "digest": value}
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(memo, json.dumps(record))
        except OSError:
            pass  # a read-only cache: hash again next time
    return value


def _the_models(relative: Path) -> bool:
    """Whether a file (relative to the model folder, members included) is part of the trained model."""
    folders = relative.parts[:-1]
    if any(part.startswith(".") or part in NOT_THE_MODEL_DIRS for part in folders):
        return False
    return relative.name not in NOT_THE_MODEL
