"""A text file's content as newline-aligned chunks, so records are parsed a bounded piece at a time.

A chunk always ends just after a `\\n` (except the file's last one), so a line, and the `\\r\\n` that ends
it, never straddles two chunks; line numbers run on from chunk to chunk. The first `HEAD_BYTES` are
read before anything else: the file-level tests that today's reader made on the whole file's start
(binary? byte-order mark?) are made on them, and they are then served as ordinary chunks, so the
chunk size alone decides where cuts fall (tests make it tiny to put cuts everywhere).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from simpair.contracts import FileFormat
from simpair.ingest.reader import EmptySourceFileError, SourceFileError, _describe_delimiter, is_utf8
from simpair.ingest.sources import ContentStream

HEAD_BYTES = 65536
CHUNK_BYTES = 8 << 20


@dataclass
class TextChunks:
    """Chunks of one text file plus what the stream taught about the file as a whole."""

    stream: ContentStream
    fmt: FileFormat
    size: int = CHUNK_BYTES
    bom: bool = False
    lines: int = 0  # physical lines served so far
    blank: bool = True  # only whitespace (and a BOM) so far: no record at all
    _head: bytes = field(default=b"", repr=False)
    _forbidden: bool = False

    def _raise_forbidden(self) -> None:
        raise SourceFileError(
            f"{self.stream.name}: starts with a UTF-8 byte-order mark, which the contract forbids"
        )

    def open(self) -> TextChunks:
        """Read the head and fail the file early when it cannot be text of the contract."""
        head = self.stream.read(HEAD_BYTES)
        while len(head) < HEAD_BYTES and (more := self.stream.read(HEAD_BYTES - len(head))):
            head += more
        name, fmt = self.stream.name, self.fmt
        body = head.removeprefix(codecs.BOM_UTF8)
        if b"\x00" in head and not fmt.encoding.lower().startswith("utf-16") and body.strip():
            expected = (
                "JSON Lines"
                if fmt.kind == "jsonl"
                else f"{_describe_delimiter(fmt.delimiter or '')}-separated"
            )
            raise SourceFileError(
                f"{name}: looks binary (NUL bytes); expected {fmt.encoding} text, {expected}"
            )
        if head.startswith(codecs.BOM_UTF8) and is_utf8(fmt):
            self._forbidden = fmt.bom == "forbid"  # an error unless the file turns out blank
            if self._forbidden and body.strip():
                self._raise_forbidden()
            head = body
            self.bom = True
        self._head = head
        return self

    def _blocks(self) -> Iterator[bytes]:
        head, self._head = self._head, b""
        for start in range(0, len(head), self.size):
            yield head[start : start + self.size]
        while block := self.stream.read(self.size):
            yield block

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        """(number of the chunk's first line, chunk); every chunk but the last ends with a newline.

        A chunk is a new uint8 array: the previous block's unfinished line, then this block up to its
        last newline. numpy copies them with the GIL released, where joining and slicing `bytes`
        held it for about 0.3 s per 2M rows, stalling the parse running on the other thread.
        """
        carry = _NOTHING
        for block in self._blocks():
            if self.blank and block.strip():
                self.blank = False
                if self._forbidden:
                    self._raise_forbidden()
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                carry = _joined(carry, block, len(block))
                continue
            chunk = _joined(carry, block, cut)
            carry = np.frombuffer(block, dtype=np.uint8, offset=cut)
            yield self._serve(chunk)
        if len(carry):
            yield self._serve(carry.copy())
        if self.blank:  # a BOM and blank lines hold no record either
            raise EmptySourceFileError(
                f"{self.stream.name}: file is empty; expected {self.fmt.encoding} text records"
            )

    def rest_is_blank(self) -> bool:
        """Whether the file so far and the rest of it hold only whitespace (read to its end to tell)."""
        if not self.blank:
            return False
        for block in self._blocks():
            if block.strip():
                self.blank = False
                return False
        return True

    def _serve(self, chunk: np.ndarray) -> tuple[int, np.ndarray]:
        first = self.lines + 1
        newlines = np.count_nonzero(chunk == 10)  # half of bytes.count's CPU
        self.lines += int(newlines) + (not ends_line(chunk))
        return first, chunk


_NOTHING = np.empty(0, dtype=np.uint8)
# A chunk as TextChunks serves it (uint8 array), or as bytes (a header's first chunk, tests).
Chunk = bytes | np.ndarray


def _joined(carry: np.ndarray, block: bytes, stop: int) -> np.ndarray:
    """`carry` then `block[:stop]`, as one new array."""
    out = np.empty(len(carry) + stop, dtype=np.uint8)
    out[: len(carry)] = carry
    out[len(carry) :] = np.frombuffer(block, dtype=np.uint8, count=stop)
    return out


def ends_line(chunk: Chunk) -> bool:
    """Whether a chunk ends with a newline (every chunk but a file's unterminated last one does)."""
    return len(chunk) > 0 and chunk[-1] == 10


def chunk_pieces(chunk: Chunk) -> list[bytes]:
    """The chunk's lines without their `\\n` (a chunk ends at a line end, or at the file's end)."""
    data = chunk if isinstance(chunk, bytes) else chunk.tobytes()
    pieces = data.split(b"\n")
    if data.endswith(b"\n"):
        pieces.pop()
    return pieces
