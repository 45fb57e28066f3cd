"""Where raw files live: a local folder or any fsspec URL (`s3://bucket/raw`, `gs://…`, `file://…`).

Ingest lists a split's files by glob, hashes their stored bytes (the dataset version is a function of
them) and reads them decompressed. Compression is by file name, as users name their exports:
`.gz` is gzip and `.zst`/`.zstd` is zstd, both decoded by pyarrow so no extra package is needed.
Object stores need their fsspec driver: `pip install 'simpair[s3]'` for `s3://`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import fsspec
import pyarrow as pa

HASH_BLOCK = 8 << 20
_COMPRESSION_BY_SUFFIX = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}


class SourceAccessError(OSError):
    """A sources location that cannot be listed or read; the message names the URL."""


def compression_of(name: str, setting: str = "infer") -> str | None:
    """pyarrow codec name for a file, or None for plain bytes."""
    if setting == "none":
        return None
    if setting != "infer":
        return setting
    return _COMPRESSION_BY_SUFFIX.get(PurePosixPath(name).suffix.lower())


def plain_stem(name: str) -> str:
    """File name without its compression and format suffixes: `2026-11-24.tsv.gz` -> `2026-11-24`."""
    path = PurePosixPath(name)
    if path.suffix.lower() in _COMPRESSION_BY_SUFFIX:
        path = path.with_suffix("")
    return path.stem


@dataclass(frozen=True)
class SourceRoot:
    """The `--sources` location; file names below it are relative POSIX paths."""

    url: str

    @classmethod
    def of(cls, location: str | Path) -> SourceRoot:
        return cls(str(location))

    @property
    def is_remote(self) -> bool:
        return "://" in self.url and not self.url.startswith("file://")

    def _fs(self) -> tuple[fsspec.AbstractFileSystem, str]:
        try:
            fs, root = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as exc:  # e.g. s3fs missing for s3://
            raise SourceAccessError(
                f"{self.url}: cannot open this location ({exc}); object stores need their fsspec driver, "
                "e.g. pip install 'simpair[s3]'"
            ) from exc
        return fs, root.rstrip("/")

    def display(self, relative: str) -> str:
        """How errors name a file: a local path, or the full URL."""
        if self.is_remote:
            return f"{self.url.rstrip('/')}/{relative}"
        return str(Path(self.url.removeprefix("file://")) / relative)

    def glob(self, pattern: str) -> list[str]:
        """Relative names of the files matching `pattern`, in name order."""
        if not self.is_remote:
            base = Path(self.url.removeprefix("file://"))
            return sorted(p.relative_to(base).as_posix() for p in base.glob(pattern) if p.is_file())
        fs, root = self._fs()
        fs.invalidate_cache(root)  # a long-lived worker must see tonight's uploads
        try:
            found = fs.glob(f"{root}/{pattern}", detail=True)
        except OSError as exc:
            raise SourceAccessError(f"{self.url}: cannot list {pattern!r}: {exc}") from exc
        names = [str(p)[len(root) + 1 :] for p, info in found.items() if info.get("type") != "directory"]
        return sorted(names)

    def read_bytes(self, relative: str) -> bytes:
        """The stored bytes (compressed if the file is)."""
        if not self.is_remote:
            return (Path(self.url.removeprefix("file://")) / relative).read_bytes()
        fs, root = self._fs()
        try:
            return fs.cat_file(f"{root}/{relative}")
        except OSError as exc:
            raise SourceAccessError(f"{self.display(relative)}: cannot read: {exc}") from exc


def decompress(data: bytes, codec: str | None, name: str) -> bytes:
    """The file's content; a damaged or mislabelled archive fails with the file named."""
    if codec is None:
        return data
    try:
        with pa.CompressedInputStream(pa.BufferReader(data), codec) as stream:
            return stream.read()
    except (OSError, pa.ArrowException) as exc:
        raise SourceAccessError(f"{name}: cannot decompress as {codec}: {exc}") from exc
