"""Parse one source file as a stream: records in batches, rows checked, parts written; memory stays flat.

`parse_file` is one unit of work with no shared state: the files of a source can be parsed one after
another or as parallel tasks, each writing its own folder of parts under the version's work folder.
Delimited `quoting: none` UTF-8 files take the vectorised path (`fastpath`) for their plain lines;
CSV-quoted, JSON Lines and Parquet files go record by record through the same code as the lines the
vectorised path flags. File-level failures are decided as the whole-file reader decided them (see
`reader.py`), from the file's head or from counts gathered while streaming.
"""

from __future__ import annotations

import itertools
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from simpair.contracts import Contract
from simpair.ingest import fastpath
from simpair.ingest.background import BackgroundWrites
from simpair.ingest.batches import BATCH_ROWS, PartSink, candidates_frame
from simpair.ingest.chunks import CHUNK_BYTES, TextChunks, chunk_pieces
from simpair.ingest.chunktask import ChunkRunner, FileContext
from simpair.ingest.reader import (
    EmptySourceFileError,
    RawRecord,
    SourceFileError,
    _csv_records,
    _plain_records,
    check_jsonl,
    check_layout,
    decode_pieces,
    jsonl_line,
    jsonl_record,
    parquet_batches,
)
from simpair.ingest.rows import build_candidates, resolve_columns
from simpair.ingest.sources import ContentStream, SourceRoot, compression_of, decompress
from simpair.ingest.workers import default_workers
from simpair.stages import step

RECORD_BATCH = 20_000  # records per call of the per-record path
_T = TypeVar("_T")
_END = object()  # no item left


@dataclass
class FileJob:
    """Everything needed to parse one file, picklable so a task runner can ship it to a worker."""

    contract: Contract
    sources: str
    relative: str
    sha256: str  # empty: not hashed yet, so the parse hashes it as it reads (see `dataset.resolve_files`)
    tag: str
    split: str | None  # None: split_column assigns each row its split
    file_index: int
    work: Path  # the version's work folder (its own folder of parts is made below it)
    only_file: bool  # the only file of its split: an empty file fails the source instead of being noted
    size: int | None = None  # stored bytes, as the parse's read counted them
    chunk_bytes: int = CHUNK_BYTES
    batch_rows: int = BATCH_ROWS
    workers: int = 0  # processes parsing a large delimited file; 0: $SIMPAIR_INGEST_WORKERS or 1


@dataclass
class FileResult:
    relative: str
    file_index: int
    empty: bool = False
    records: int = 0
    records_by_split: dict[str, int] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)  # reading and cleaning counts of the file
    parts: list[Path] = field(default_factory=list)
    quarantine_parts: list[Path] = field(default_factory=list)
    sha256: str = ""  # the file's; its parts leave out the columns that are constant per file
    size: int | None = None  # the file's stored bytes as read (None: not read as a stream, e.g. Parquet)
    split: str | None = None  # the file's split; None: its rows may go to any split (split_column)


@step("parse-file", run_name="parse-{job.contract.dataset}-{job.relative}")
def parse_file(job: FileJob) -> FileResult:
    """Parse one file into its folder of parts; a file that cannot be ingested raises SourceFileError.

    A file not hashed before (empty `sha256`) is hashed by its first read; later reads of it (a second
    pass, a layout error's wording) must then find the same bytes.
    """
    job = replace(job)  # this parse's own copy: its first read records the hash here
    root = SourceRoot.of(job.sources)
    folder = job.work / f"file-{job.file_index:06d}"
    stats: Counter[str] = Counter()
    try:
        with BackgroundWrites() as writes:  # every part is on disk once this block is left
            sink = PartSink(job.contract, folder, job.file_index, job.relative, job.batch_rows)
            sink.writes = writes
            if job.contract.format.kind == "parquet":
                records = _parquet(job, root, sink, stats)
            else:
                records = _text(job, root, sink, stats)
            sink.flush()
    except EmptySourceFileError:
        shutil.rmtree(folder, ignore_errors=True)
        if job.only_file:
            raise
        return FileResult(job.relative, job.file_index, empty=True, sha256=job.sha256, size=job.size)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return FileResult(
        job.relative,
        job.file_index,
        records=records,
        records_by_split=dict(sink.records_by_split),
        stats={k: v for k, v in stats.items() if v},
        parts=sink.parts,
        quarantine_parts=sink.quarantine_parts,
        sha256=job.sha256,
        size=job.size,
        split=job.split,
    )


@contextmanager
def _open_text(job: FileJob, root: SourceRoot) -> Iterator[tuple[ContentStream, TextChunks]]:
    name = root.display(job.relative)
    fmt = job.contract.format
    with root.open_stored(job.relative) as stored:
        stream = ContentStream(stored, compression_of(job.relative, fmt.compression), name)
        chunks = TextChunks(stream, fmt, job.chunk_bytes).open()
        try:
            yield stream, chunks
        except EmptySourceFileError:
            _read_whole(job, stream, name)  # an empty file names the version too
            raise
        except SourceFileError:  # a blank file is "empty" first, whatever else its first line broke
            if chunks.rest_is_blank():
                _read_whole(job, stream, name)
                raise EmptySourceFileError(
                    f"{name}: file is empty; expected {fmt.encoding} text records"
                ) from None
            raise
        _read_whole(job, stream, name)


def _read_whole(job: FileJob, stream: ContentStream, name: str) -> None:
    """Hash the rest of the stored bytes; record hash and size on the job, or fail if they changed."""
    digest = stream.sha256()
    if job.sha256 and digest != job.sha256:
        raise SourceFileError(f"{name}: changed while it was being ingested; run the ingest again")
    job.sha256, job.size = digest, stream.hashing.bytes


def _lines(chunks: TextChunks, stats: Counter[str]) -> Iterator[tuple[str, bool]]:
    for _, chunk in chunks:
        yield from decode_pieces(chunk_pieces(chunk), chunks.fmt, stats)


def _text(job: FileJob, root: SourceRoot, sink: PartSink, stats: Counter[str]) -> int:
    fmt = job.contract.format
    if fmt.kind == "jsonl":
        keys: dict[str, None] = {}
        broken = total = 0
        with _open_text(job, root) as (_, chunks):
            for n, (text, ok) in enumerate(_lines(chunks, Counter()), start=1):
                _, _, obj, error = jsonl_line(n, text, ok, fmt)
                total += 1
                broken += error is not None
                if obj:
                    keys.update(dict.fromkeys(obj))
        check_jsonl(broken, total, root.display(job.relative))
        header = list(keys)
        positions = resolve_columns(job.contract, header, root.display(job.relative))
        with _open_text(job, root) as (_, chunks):
            stats["bom"] += chunks.bom
            lines = (jsonl_line(n, t, ok, fmt) for n, (t, ok) in enumerate(_lines(chunks, stats), start=1))
            records = (jsonl_record(line, header) for line in lines)
            return _per_record(job, records, positions, sink, stats)
    with _open_text(job, root) as (_, chunks):
        stats["bom"] += chunks.bom
        if fmt.quoting == "csv":
            return _csv(job, root, chunks, sink, stats)
        return _plain(job, root, chunks, sink, stats)


def _per_record(
    job: FileJob,
    records: Iterator[RawRecord],
    positions: dict[str, list[int]],
    sink: PartSink,
    stats: Counter[str],
    counted: Counter[int] | None = None,
) -> int:
    """Map records in batches through `rows.build_candidates`; returns how many there were."""
    total = 0
    while batch := list(itertools.islice(records, RECORD_BATCH)):
        total += len(batch)
        if counted is not None:
            counted.update(len(r.fields) if r.fields is not None else -1 for r in batch)
        cand = build_candidates(batch, job.contract, positions, job.split, job.tag)
        stats.update(cand.clean_stats.counts)
        sink.add(candidates_frame(cand, job.contract), cand.rejected)
    return total


def _header(first: RawRecord | None, name: str) -> list[str]:
    if first is None or first.fields is None:
        raise SourceFileError(f"{name}: expected a header row, found no readable first line")
    return [h.strip() for h in first.fields]


def _positions(job: FileJob, header: list[str] | None, name: str) -> dict[str, list[int]] | SourceFileError:
    """Column positions, or the error to raise once the file's layout has been checked."""
    try:
        return resolve_columns(job.contract, header, name)
    except SourceFileError as exc:
        return exc


def _finish_layout(
    job: FileJob, root: SourceRoot, counted: Counter[int], records: int, wait: SourceFileError | None
) -> None:
    """The whole-file tests, in the reader's order: no records, wrong layout, then a missing column."""
    name = root.display(job.relative)
    if records == 0:
        raise EmptySourceFileError(f"{name}: no data records after the header; expected at least one")
    unreadable = counted.pop(-1, 0)
    check_layout(counted, unreadable, records, name, job.contract.format, lambda: _relines(job, root))
    if wait is not None:
        raise wait


def _relines(job: FileJob, root: SourceRoot) -> Iterator[tuple[str, bool]]:
    """The file's lines again, only to word a layout error."""
    with _open_text(job, root) as (_, chunks):
        yield from _lines(chunks, Counter())


def _csv(job: FileJob, root: SourceRoot, chunks: TextChunks, sink: PartSink, stats: Counter[str]) -> int:
    fmt, name = job.contract.format, root.display(job.relative)
    records = _csv_records(_lines(chunks, stats), fmt)
    header = _header(next(records, None), name) if fmt.header else None
    positions = _positions(job, header, name)
    counted: Counter[int] = Counter()
    if isinstance(positions, SourceFileError):
        counted.update(len(r.fields) if r.fields is not None else -1 for r in records)
        total = counted.total()
    else:
        total = _per_record(job, records, positions, sink, stats, counted)
    _finish_layout(job, root, counted, total, positions if isinstance(positions, SourceFileError) else None)
    return total


def _plain(job: FileJob, root: SourceRoot, chunks: TextChunks, sink: PartSink, stats: Counter[str]) -> int:
    contract, name = job.contract, root.display(job.relative)
    fmt = contract.format
    assert fmt.delimiter is not None
    fast = fastpath.eligible(contract)
    positions: dict[str, list[int]] | SourceFileError | None = None
    counted: Counter[int] = Counter()
    total = 0
    runner: ChunkRunner | None = None
    reading = _read_ahead(chunks)
    try:
        for first, chunk in reading:
            if positions is None:
                header = None
                if fmt.header:
                    chunk = bytes(chunk)  # the first chunk alone: its header line is cut off as bytes
                    cut = chunk.find(b"\n")
                    ((text, ok),) = decode_pieces([chunk if cut < 0 else chunk[:cut]], fmt, stats)
                    header = _header(RawRecord(first, text, text.split(fmt.delimiter) if ok else None), name)
                    chunk, first = (b"" if cut < 0 else chunk[cut + 1 :]), first + 1
                positions = _positions(job, header, name)
                if not len(chunk):
                    continue
            if fast and not isinstance(positions, SourceFileError):
                if runner is None:
                    context = FileContext(
                        contract, positions, job.split, job.tag, sink.folder, job.file_index, job.relative
                    )  # fmt: skip
                    runner = ChunkRunner(context, job.workers or default_workers(), sink.writes)
                runner.add(first, chunk)
                continue
            plain = list(_plain_records(decode_pieces(chunk_pieces(chunk), fmt, stats), fmt, first))
            if isinstance(positions, SourceFileError):
                total += len(plain)
                counted.update(len(r.fields) if r.fields is not None else -1 for r in plain)
            else:
                total += _per_record(job, iter(plain), positions, sink, stats, counted)
        if runner is not None:
            done = runner.finish()
            total += done.records
            counted.update(done.field_counts)
            stats.update(done.stats)
            sink.records_by_split.update(done.records_by_split)
            sink.parts += done.parts
            sink.quarantine_parts += done.quarantine_parts
    finally:
        reading.close()  # no read is left running once the caller closes the stream
        if runner is not None:
            runner.close()
    _finish_layout(job, root, counted, total, positions if isinstance(positions, SourceFileError) else None)
    return total


def _read_ahead(items: Iterable[_T]) -> Iterator[_T]:
    """`items`, the next one taken on a second thread while the caller works on this one.

    Reading, hashing and cutting a chunk (file reads, sha256 and the newline count release the GIL)
    then overlap the parse of the one before: a sixth of the parsing thread's time at 2M rows
    (2026-11-26). One item is read ahead, so one more chunk is held; leaving early waits for that read,
    so nothing reads the file once its stream is closed.
    """
    it = iter(items)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="simpair-read") as pool:
        ahead = pool.submit(next, it, _END)
        while (item := ahead.result()) is not _END:
            ahead = pool.submit(next, it, _END)
            yield item  # type: ignore[misc]


def _parquet(job: FileJob, root: SourceRoot, sink: PartSink, stats: Counter[str]) -> int:
    name = root.display(job.relative)
    codec = compression_of(job.relative, job.contract.format.compression)
    with root.open_stored(job.relative) as stored:
        source = stored if codec is None else pa.BufferReader(decompress(stored.read(), codec, name))
        header, batches = parquet_batches(source, name, RECORD_BATCH)
        positions = resolve_columns(job.contract, header, name)
        return _per_record(job, (r for batch in batches for r in batch), positions, sink, stats)
