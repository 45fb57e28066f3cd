"""`simpair encode`: a bi-encoder's sentence vectors for a Parquet file, streamed to Parquet.

Why streamed: a file of millions of sentences must not need millions of vectors (or token lists) in
memory. Rows are read in batches, each batch's distinct texts encoded and written as one row group,
so memory stays that of one batch whatever the file's size. The vectors are a fixed-size
list<float32> column (readers get an (n, dims) array without copying lists); the width, the model's
name and version and that vectors are L2-normalised travel in the file's metadata. Rows with a null
or empty text go to `<output>.rejects.parquet` with their row number and reason; the rest go on.
Vectors go through the embedding store as in `simpair mine` (`simpair.runtime.stored_predict`):
a rerun after a kill, or tomorrow's file with `--embedding-cache`, encodes only what is new.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from simpair.atomic import atomic_path
from simpair.defaults import DEFAULT_MINE_EMBEDDING_MEMORY_MB
from simpair.mining.encoder import (
    bi_encoder,
    check_bi_encoder,
    embedding_dims,
    output_store,
    resolve_precision,
)
from simpair.mining.pairs import write_rejects
from simpair.mining.sentences import DEFAULT_BATCH_ROWS, Rejects, distinct, iter_sentences, open_sentences
from simpair.progress import progress
from simpair.runtime.embedding_store import release_store
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import RuntimeOptions

METADATA_KEY = b"simpair.encode"
# the store's memory bound as in `simpair mine`: each distinct text is looked up once per batch
ENCODE_RUNTIME = RuntimeOptions(embedding_memory_mb=DEFAULT_MINE_EMBEDDING_MEMORY_MB)


class EncodeSummary(BaseModel):
    """What an encoding run did."""

    output: str
    rejects: str | None
    model: str
    dims: int
    rows: int
    encoded: int
    rejected: int
    seconds: float
    embedding_store: str | None = None  # the store's folder; None when off
    embedding_store_kept: bool = False
    sentences_encoded: int = 0  # distinct texts the encoder ran on (store misses)
    embedding_memory_hits: int = 0
    embedding_disk_hits: int = 0
    precision: str = "fp32"  # what the vectors were computed in (resolved: never auto)
    precision_why: str | None = None  # with auto: which rung the model's verdict chose, and why


def output_schema(dims: int, model: ModelRef, precision: str = "fp32") -> pa.Schema:
    """row (in the input), id, text, embedding[dims]; how they were made in the metadata."""
    meta = {"model": model.name, "version": model.version, "dims": dims, "normalized": True,
            "precision": precision}  # fmt: skip
    fields = [
        ("row", pa.int64()),
        ("id", pa.string()),
        ("text", pa.string()),
        ("embedding", pa.list_(pa.float32(), dims)),
    ]
    return pa.schema(fields, metadata={METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})


def read_encode_metadata(path: str | Path) -> dict[str, object]:
    """The model, version and width an embeddings file was written with."""
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(METADATA_KEY, b"{}"))


def embedding_matrix(table: pa.Table) -> np.ndarray:
    """The embedding column as an (n, dims) float32 array (no per-row copies)."""
    column = table.column("embedding").combine_chunks()
    dims = column.type.list_size
    return column.flatten().to_numpy(zero_copy_only=False).reshape(-1, dims)


def encode_file(
    input: str | Path,
    output: str | Path,
    model: ModelRef,
    *,
    column: str = "text",
    id_column: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    show_progress: bool = True,
    runtime: RuntimeOptions = ENCODE_RUNTIME,
    home: str | Path | None = None,
) -> EncodeSummary:
    """Write the vectors of every usable row of `input` to `output`; see the module docstring.

    `runtime` says how the model runs (batch size, threads, backend, precision, the embedding store);
    `home` holds the registry an explicit int8's stored check is read from.
    """
    started = time.monotonic()
    total = open_sentences(input, column, id_column).metadata.num_rows  # fails before the model loads
    check_bi_encoder(model)  # a wrong kind fails before any precision is resolved
    runtime, why = resolve_precision(model, runtime, Path(home) if home else None)
    folder = output_store(output, runtime)
    encoder = bi_encoder(model, runtime, folder)
    dims = embedding_dims(encoder)
    schema = output_schema(dims, model, runtime.precision)
    rejects, encoded = Rejects(), 0
    bar = progress(total=total, desc="encode", unit="row", disable=not show_progress)
    with atomic_path(Path(output)) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for part in iter_sentences(input, column, id_column, batch_rows):
            rejects.extend(part.rejects)
            if part.texts:
                texts, inverse = distinct(part.texts)
                vectors = encoder.embed(texts, batch_size=runtime.batch_size)
                flat = pa.array(vectors[np.asarray(inverse)].astype(np.float32).ravel(), pa.float32())
                table = pa.table(
                    {
                        "row": pa.array(part.rows, pa.int64()),
                        "id": pa.array(part.ids, pa.string()),
                        "text": pa.array(part.texts, pa.string()),
                        "embedding": pa.FixedSizeListArray.from_arrays(flat, dims),
                    },
                    schema=schema,
                )
                writer.write_table(table)
                encoded += len(part.texts)
            bar.update(len(part.texts) + len(part.rejects))
    bar.close()
    rejects_file = write_rejects(output, {"input": rejects})
    if folder is not None:
        release_store(folder, keep=runtime.keeps_store)
    counts = encoder.counts
    return EncodeSummary(
        output=str(output),
        rejects=str(rejects_file) if rejects_file else None,
        model=model.label,
        dims=dims,
        rows=total,
        encoded=encoded,
        rejected=len(rejects),
        seconds=round(time.monotonic() - started, 3),
        embedding_store=str(folder) if folder else None,
        embedding_store_kept=runtime.keeps_store,
        sentences_encoded=counts.encoded,
        embedding_memory_hits=counts.memory_hits,
        embedding_disk_hits=counts.disk_hits,
        precision=runtime.precision,
        precision_why=why,
    )
