"""One chunk of a delimited `quoting: none` file, parsed into its own parts: the unit a worker process runs.

A chunk carries the number of its first line (the reader counts newlines as it cuts), so chunks need
nothing from each other and can be parsed in any process, in any order; the caller keeps their
results in chunk order, which is line order. Plain lines take the vectorised path (`fastpath`), the
flagged ones the per-record code, and the chunk's rows are checked and written as one part.
"""

from __future__ import annotations

from collections import Counter, deque
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simpair.contracts import Contract
from simpair.ingest import fastpath, workers
from simpair.ingest.background import BackgroundWrites
from simpair.ingest.batches import PartSink, candidate_schema, candidates_frame
from simpair.ingest.chunks import Chunk
from simpair.ingest.reader import RawRecord, decode_pieces, undecodable_record
from simpair.ingest.rows import build_candidates


@dataclass(frozen=True)
class FileContext:
    """What every chunk of one file needs; picklable, sent with each chunk to a worker."""

    contract: Contract
    positions: dict[str, list[int]]
    split: str | None
    tag: str
    folder: Path
    file_index: int
    relative: str


@dataclass
class ChunkResult:
    records: int = 0
    field_counts: Counter[int] = field(default_factory=Counter)  # -1: undecodable lines
    stats: Counter[str] = field(default_factory=Counter)
    records_by_split: Counter[str] = field(default_factory=Counter)
    parts: list[Path] = field(default_factory=list)
    quarantine_parts: list[Path] = field(default_factory=list)


def parse_chunk(
    ctx: FileContext, number: int, first: int, chunk: Chunk, writes: BackgroundWrites | None = None
) -> ChunkResult:
    """Parse, check and write one newline-aligned chunk whose first line is number `first`.

    With `writes` its parts are written on that thread (the caller drains it before reading them).
    """
    return finish_chunk(ctx, number, _fast(ctx, first, chunk), writes)


def _fast(ctx: FileContext, first: int, chunk: Chunk) -> fastpath.FastChunk:
    return fastpath.parse_chunk(chunk, first, ctx.contract, ctx.positions, ctx.split, ctx.tag)


def finish_chunk(
    ctx: FileContext, number: int, fast: fastpath.FastChunk, writes: BackgroundWrites | None = None
) -> ChunkResult:
    """The flagged lines through the per-record code, then the chunk's rows checked and written as parts."""
    contract = ctx.contract
    fmt = contract.format
    assert fmt.delimiter is not None
    out = ChunkResult(records=len(fast.field_counts))
    out.stats["crlf_lines"] += fast.crlf
    out.stats["whitespace_fixes"] += fast.whitespace_fixes
    decoding: Counter[str] = Counter()  # \r was counted over the whole chunk: keep only the decode failures
    lines = decode_pieces([raw for _, raw in fast.flagged], fmt, decoding)
    out.stats["undecodable_lines"] += decoding["undecodable_lines"]
    records = [_plain_record(n, text, ok, fmt.delimiter, fmt.encoding)
               for (n, _), (text, ok) in zip(fast.flagged, lines, strict=True)]  # fmt: skip
    counts = fast.field_counts
    if decoding["undecodable_lines"]:
        broken = np.array([not ok for _, ok in lines])
        counts = np.delete(counts, fast.flagged_index[broken])
        out.field_counts[-1] += int(broken.sum())
    values, times = np.unique(counts, return_counts=True)
    out.field_counts.update(dict(zip(values.tolist(), times.tolist(), strict=True)))
    cand = build_candidates(records, contract, ctx.positions, ctx.split, ctx.tag)
    out.stats.update(cand.clean_stats.counts)
    rows = fast.rows.cast(candidate_schema(contract))  # type: ignore[arg-type]
    # one part per chunk (no batch limit), so parts in chunk order hold rows in line order
    sink = PartSink(contract, ctx.folder, ctx.file_index, ctx.relative, 1 << 62, f"{number:06d}-", writes)
    sink.add(rows, [])
    sink.add(candidates_frame(cand, contract), cand.rejected)
    sink.flush()
    out.records_by_split = sink.records_by_split
    out.parts, out.quarantine_parts = sink.parts, sink.quarantine_parts
    return out


def _plain_record(number: int, text: str, ok: bool, delimiter: str, encoding: str) -> RawRecord:
    if not ok:
        return RawRecord(number, text, None, undecodable_record(text, encoding))
    return RawRecord(number, text, text.split(delimiter))


def merge(into: ChunkResult, part: ChunkResult) -> None:
    into.records += part.records
    into.field_counts.update(part.field_counts)
    into.stats.update(part.stats)
    into.records_by_split.update(part.records_by_split)
    into.parts += part.parts
    into.quarantine_parts += part.quarantine_parts


class ChunkRunner:
    """Parses a file's chunks in order: in this process, or on the worker pool once a second one comes.

    Results are merged in chunk order, so parts stay in line order. At most two chunks per worker are
    in flight, which bounds the bytes held here whatever the file's size. In this process the work is
    split in two stages: the vectorised pass over a chunk here, its flagged lines, checks and parts on
    a second thread while the next chunk's pass runs (numpy and polars release the GIL); one chunk
    waits between them.
    """

    def __init__(self, context: FileContext, workers_: int, writes: BackgroundWrites | None = None) -> None:
        self.context = context
        self.writes = writes  # for chunks parsed here; workers write their own parts
        self.workers = workers_
        self.count = 0
        self.held: list[tuple[int, int, Chunk]] = []
        self.pending: deque[Future[ChunkResult]] = deque()
        self.executor: Executor | None = None
        self.inline = workers_ <= 1
        self.result = ChunkResult()
        self.stage: ThreadPoolExecutor | None = None  # the second stage of chunks parsed here

    def add(self, first: int, chunk: Chunk) -> None:
        self.count += 1
        if self.inline:
            self._here(self.count, first, chunk)
            return
        if self.executor is None:  # one chunk alone is not worth a pool: wait for a second
            self.held.append((self.count, first, chunk))
            if len(self.held) < 2:
                return
            self.executor = workers.pool(self.workers)
            held, self.held = self.held, []
            if self.executor is None:
                self.inline = True
                for number, start, data in held:
                    self._here(number, start, data)
                return
            for number, start, data in held:
                self._submit(number, start, data)
            return
        self._submit(self.count, first, chunk)

    def _here(self, number: int, first: int, chunk: Chunk) -> None:
        """Parse a chunk in this process: its vectorised pass now, the rest on the second stage."""
        fast = _fast(self.context, first, chunk)
        if self.stage is None:
            self.stage = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simpair-chunk")
        self.pending.append(self.stage.submit(finish_chunk, self.context, number, fast, self.writes))
        while len(self.pending) > 1:
            self._collect()

    def _submit(self, number: int, first: int, chunk: Chunk) -> None:
        assert self.executor is not None
        self.pending.append(self.executor.submit(parse_chunk, self.context, number, first, chunk))
        while len(self.pending) > 2 * self.workers:
            self._collect()

    def _collect(self) -> None:
        try:
            merge(self.result, self.pending.popleft().result())
        except BrokenProcessPool:
            workers.discard()
            raise

    def finish(self) -> ChunkResult:
        for number, first, chunk in self.held:
            self._here(number, first, chunk)
        self.held = []
        while self.pending:
            self._collect()
        return self.result

    def close(self) -> None:
        """On failure: no worker may still write into the file's folder once this returns."""
        for future in self.pending:
            future.cancel()
        wait(self.pending)
        self.pending.clear()
        if self.stage is not None:
            self.stage.shutdown(wait=True)
