"""Pre-tokenized cache: each dataset split tokenized once per (tokenizer, max length, input form).

Layout: `<home>/tokens/<key>/<dataset>-<split>.parquet` with a `manifest.json` beside it, where
`key = <form>-L<max_length>-f<format>-<tokenizer fingerprint>-<dataset>-<dataset version>`. Every run
with the same tokenizer, data version and cache format reads the same files; a new data version,
tokenizer or format makes a new key, so a stale cache is never read. Files are written atomically
under a file lock, so concurrent runs (or DDP ranks) tokenize once.

Forms:
- `cross`: the joint input `[CLS] a [SEP] b [SEP]` (`input_ids`, `token_type_ids`, `length`), and the
  swapped order (`input_ids_ba`, `token_type_ids_ba`, `length_ba`) for symmetric training/prediction;
- `bi`: each text alone (`ids_a`, `ids_b`, `length_a`, `length_b`).
Both carry `pair_id`, `label`, `score` and a `truncated` flag (the untruncated input was longer than
`max_length`).

The split is streamed: read in record batches, tokenized once per batch, written as one row group per
batch, so memory stays flat in the number of rows. Ids are `list<uint16>` when the vocabulary fits in
65,536 ids (else `list<int32>`), token types `list<int8>`, lengths `int32`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock
from transformers import PreTrainedTokenizerBase

from simpair.atomic import atomic_path
from simpair.catalog import Catalog
from simpair.models.tokenizer import tokenizer_fingerprint
from simpair.pair_tokens.ahead import Ahead
from simpair.pair_tokens.encode import Form, encoder_for, ids_type

TOKENS_FORMAT = 2
BATCH_ROWS = 32_768  # rows per batch and row group: amortises the calls; about 250 MB at peak, flat in rows
SOURCE_COLUMNS = ["pair_id", "text_a", "text_b", "label", "score"]


@dataclass(frozen=True)
class TokenSplit:
    """Where one split's tokens live and whether this call reused them."""

    path: Path
    key: str
    dataset: str
    split: str
    version: str
    rows: int
    reused: bool


def cache_key(fingerprint: str, max_length: int, form: Form, dataset: str, version: str) -> str:
    return f"{form}-L{max_length}-f{TOKENS_FORMAT}-{fingerprint}-{dataset}-{version}"


def tokenize_frame(
    frame: pl.DataFrame, tokenizer: PreTrainedTokenizerBase, max_length: int, form: Form
) -> pa.Table:
    """Tokenize canonical pairs into the cache table for one form (pure: no I/O)."""
    encoder = encoder_for(tokenizer, max_length, form)
    return encoder.encode(frame.to_arrow())


def _source_files(path: Path) -> list[Path]:
    """One Parquet file, or a folder of Parquet parts read in name order."""
    if path.is_dir():
        return sorted(p for p in path.glob("*.parquet") if not p.name.startswith("."))
    return [path]


def iter_pair_batches(path: Path, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The split's pairs in record batches of `batch_rows` (the last of a file shorter), one row group held.

    Row group by row group, re-cut into batches of `batch_rows` as `iter_batches` cut them: pyarrow's
    `ParquetFile.iter_batches` kept about 56 bytes of Arrow memory per row read until the file was
    closed (1.2M rows: 77 MB against 12 MB read this way), which made pretokenize grow with the split.
    """
    for file in _source_files(path):
        source = pq.ParquetFile(file)
        columns = [c for c in SOURCE_COLUMNS if c in source.schema_arrow.names]
        pending: pa.Table | None = None
        for group in range(source.num_row_groups):
            table = source.read_row_group(group, columns=columns)
            pending = table if pending is None else pa.concat_tables([pending, table])
            while pending.num_rows >= batch_rows:
                yield from pending.slice(0, batch_rows).combine_chunks().to_batches()
                pending = pending.slice(batch_rows)
        if pending is not None and pending.num_rows:
            yield from pending.combine_chunks().to_batches()


def write_tokens(
    batches: Iterator[pa.RecordBatch],
    target: Path,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    form: Form,
) -> tuple[int, int]:
    """Tokenize batches into `target` (atomically), one row group per batch; returns (rows, truncated)."""
    encoder = encoder_for(tokenizer, max_length, form)
    rows = truncated = 0
    with (
        atomic_path(target) as tmp,
        pq.ParquetWriter(tmp, encoder.schema, compression="zstd") as writer,
        ThreadPoolExecutor(1) as pool,
        Ahead(batches, depth=1, name="simpair-pretokenize-read") as ahead,
    ):
        # Arrow reads the next batch and compresses and writes the last one (GIL released) while this
        # one is tokenized: at most one batch waits on each side, so memory stays flat; reading and
        # writing were each about a fifth of the time.
        pending: Future[None] | None = None
        for batch in ahead:
            if batch.num_rows == 0:
                continue
            table = encoder.encode(batch)
            if pending is not None:
                pending.result()
            pending = pool.submit(writer.write_table, table, row_group_size=table.num_rows)
            rows += table.num_rows
            truncated += int(table["truncated"].to_numpy().sum())
        if pending is not None:
            pending.result()
    return rows, truncated


def pretokenize(
    home: Path,
    dataset: str,
    split: str,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    form: Form,
    version: str | None = None,
    batch_rows: int = BATCH_ROWS,
) -> TokenSplit:
    """Tokens of one split, from the cache if present, else tokenized now (streamed) and cached."""
    if form not in ("cross", "bi"):
        raise ValueError(f"form must be 'cross' or 'bi', got {form!r}")
    catalog = Catalog(home)
    version = version or catalog.current_version(dataset)
    fingerprint = tokenizer_fingerprint(tokenizer)
    key = cache_key(fingerprint, max_length, form, dataset, version)
    folder = Path(home) / "tokens" / key
    path = folder / f"{dataset}-{split}.parquet"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        if path.exists():
            rows = pq.ParquetFile(path).metadata.num_rows
            return TokenSplit(path, key, dataset, split, version, rows, reused=True)
        source = catalog.split_path(dataset, split, version)
        batches = iter_pair_batches(source, batch_rows)
        rows, truncated = write_tokens(batches, path, tokenizer, max_length, form)
        manifest_path = folder / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        manifest.update(
            {
                "format": TOKENS_FORMAT,
                "form": form,
                "max_length": max_length,
                "ids_dtype": str(ids_type(tokenizer)),
                "tokenizer_fingerprint": fingerprint,
                "tokenizer_class": type(tokenizer).__name__,
                "dataset": dataset,
                "dataset_version": version,
            }
        )
        manifest.setdefault("splits", {})[split] = {
            "rows": rows,
            "truncated": truncated,
            "source": str(source),
        }
        manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return TokenSplit(path, key, dataset, split, version, rows, reused=False)


def read_tokens(token_split: TokenSplit | Path) -> pl.DataFrame:
    """The cached token table as a polars frame."""
    path = token_split.path if isinstance(token_split, TokenSplit) else Path(token_split)
    return pl.read_parquet(path)
