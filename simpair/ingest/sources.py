"""Where raw files live: a local folder or any fsspec URL (`s3://bucket/raw`, `gs://…`, `file://…`).

Ingest lists a split's files by glob, hashes their stored bytes (the dataset version is a function of
them) and reads them decompressed. Both are streams read in blocks of `HASH_BLOCK`, so hashing and
parsing a file of any size hold one block at a time, never the file. Compression is by file name,
as users name their exports: `.gz` is gzip and `.zst`/`.zstd` is zstd, both decoded by pyarrow so no
extra package is needed.
Object stores need their fsspec driver: `pip install 'simpair[s3]'` for `s3://`.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa

if TYPE_CHECKING:
    import fsspec

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
        import fsspec  # only remote locations need it: a local ingest starts about 50 ms sooner

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
        return list(self.listing(pattern))

    def listing(self, pattern: str) -> dict[str, int | None]:
        """The files matching `pattern` (relative names, in name order) with their stored sizes.

        A size is None where the store does not say (some HTTP servers): such a file is never taken
        for one a stored version holds. Remote sizes come from the listing itself, one request.
        """
        if not self.is_remote:
            base = Path(self.url.removeprefix("file://"))
            files = (p for p in base.glob(pattern) if p.is_file())
            return dict(sorted((p.relative_to(base).as_posix(), p.stat().st_size) for p in files))
        fs, root = self._fs()
        fs.invalidate_cache(root)  # a long-lived worker must see tonight's uploads
        try:
            found = fs.glob(f"{root}/{pattern}", detail=True)
        except OSError as exc:
            raise SourceAccessError(f"{self.url}: cannot list {pattern!r}: {exc}") from exc
        sizes = {
            str(p)[len(root) + 1 :]: info.get("size") if isinstance(info.get("size"), int) else None
            for p, info in found.items()
            if info.get("type") != "directory"
        }
        return dict(sorted(sizes.items()))

    @contextmanager
    def open_stored(self, relative: str) -> Iterator[BinaryIO]:
        """The stored bytes (compressed if the file is) as a stream; errors name the file."""
        try:
            if not self.is_remote:
                handle: BinaryIO = (Path(self.url.removeprefix("file://")) / relative).open("rb")
            else:
                fs, root = self._fs()
                handle = fs.open(f"{root}/{relative}", "rb", block_size=HASH_BLOCK)
        except SourceAccessError:
            raise
        except OSError as exc:
            raise SourceAccessError(f"{self.display(relative)}: cannot read: {exc.strerror or exc}") from exc
        with handle:
            yield handle

    def sha256(self, relative: str) -> str:
        """sha256 of the stored bytes, read in blocks: memory stays flat whatever the file's size."""
        digest = hashlib.sha256()
        with self.open_stored(relative) as handle:
            while block := _read_block(handle, self.display(relative)):
                digest.update(block)
        return digest.hexdigest()

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


def _read_block(handle: BinaryIO, name: str, size: int = HASH_BLOCK) -> bytes:
    try:
        return handle.read(size)
    except OSError as exc:
        raise SourceAccessError(f"{name}: cannot read: {exc.strerror or exc}") from exc


class HashingReader(io.RawIOBase):
    """Passes a stored stream through while hashing it, so a parse can prove it read the hashed bytes."""

    def __init__(self, handle: BinaryIO, name: str) -> None:
        self._handle = handle
        self._name = name
        self.digest = hashlib.sha256()
        self.bytes = 0  # stored bytes read so far

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        block = _read_block(self._handle, self._name, len(buffer))
        self.digest.update(block)
        self.bytes += len(block)
        buffer[: len(block)] = block
        return len(block)

    def read(self, size: int = -1) -> bytes:
        block = _read_block(self._handle, self._name, HASH_BLOCK if size < 0 else size)
        self.digest.update(block)
        self.bytes += len(block)
        return block

    def drain(self) -> str:
        """Hash whatever is left (a decoder may stop before the stored end) and return the hex digest."""
        while self.read(HASH_BLOCK):
            pass
        return self.digest.hexdigest()


class ContentStream:
    """A file's decompressed content read block by block; a damaged archive fails with the file named."""

    def __init__(self, stored: BinaryIO, codec: str | None, name: str) -> None:
        self.name = name
        self.codec = codec
        self.hashing = HashingReader(stored, name)
        self._stream: object = (
            self.hashing
            if codec is None
            else pa.CompressedInputStream(pa.PythonFile(self.hashing, "r"), codec)
        )

    def read(self, size: int) -> bytes:
        try:
            data = self._stream.read(size)  # type: ignore[attr-defined]
        except SourceAccessError:
            raise
        except (OSError, pa.ArrowException) as exc:
            if self.codec is None:
                raise SourceAccessError(f"{self.name}: cannot read: {exc}") from exc
            raise SourceAccessError(f"{self.name}: cannot decompress as {self.codec}: {exc}") from exc
        return bytes(data)

    def sha256(self) -> str:
        """The stored bytes' hash, once the content has been read to its end."""
        return self.hashing.drain()
