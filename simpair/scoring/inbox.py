"""The inbox: where new Parquet batches land, on a local disk or any fsspec URL (`s3://`, `file://`).

A batch's identity is the SHA-256 of its bytes, not its name: the ledger keys on it, so re-running
over the same inbox skips what was scored, and a file rewritten under the same name is new work.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import IO

import fsspec

from simpair.stages import step

HASH_BLOCK = 8 << 20


@dataclass(frozen=True)
class InboxFile:
    """One candidate batch: the URL to open it by, its name relative to the inbox, its size."""

    url: str
    name: str
    size: int


@step("list-inbox", retries=2, retry_delay_seconds=5)
def list_inbox(inbox: str) -> list[InboxFile]:
    """Every file under the inbox, recursively, sorted by name.

    Names starting with `.` or `_` (in any path segment) are ignored: uploaders write temporaries
    that way, and Spark/Hive use `_SUCCESS`/`_temporary`. Every other file is a batch, so a stray
    CSV is quarantined with a reason rather than silently ignored.
    """
    fs, root = fsspec.core.url_to_fs(inbox)
    root = root.rstrip("/")
    # A long-lived worker would otherwise list a bucket from its cache and miss tonight's uploads.
    fs.invalidate_cache(root)
    if not fs.exists(root):
        if _is_object_store(fs) and fs.exists(root.split("/", 1)[0]):
            return []  # object stores have no folders: an empty prefix of an existing bucket is empty
        raise FileNotFoundError(f"inbox not found: {inbox}")
    found: list[InboxFile] = []
    for path, info in sorted(fs.find(root, detail=True).items()):
        name = path[len(root) :].lstrip("/")
        if any(part.startswith((".", "_")) for part in name.split("/")):
            continue
        found.append(InboxFile(url=fs.unstrip_protocol(path), name=name, size=int(info.get("size") or 0)))
    return found


def _is_object_store(fs: fsspec.AbstractFileSystem) -> bool:
    """True for key-value stores (S3, GCS, Azure) where a "folder" exists only while it holds files."""
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return bool(protocols & {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})


def open_batch(url: str) -> IO[bytes]:
    """Open a batch for binary reading, wherever it lives."""
    return fsspec.open(url, "rb").open()


def content_hash(url: str) -> str:
    """SHA-256 of the file's bytes, read in 8 MB blocks so memory stays flat."""
    digest = hashlib.sha256()
    with open_batch(url) as handle:
        while block := handle.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()
