"""CLI command `simpair encode`: a bi-encoder's sentence embeddings for a Parquet file of sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from simpair.cli.common import (
    BackendOption,
    BiEncoderOption,
    HomeOption,
    IdColumnOption,
    JsonOutOption,
    PrecisionOption,
    SentenceColumnOption,
    StrictOption,
    json_owns_stdout,
    report_console,
    require_registered,
    validation_message,
    write_json,
)
from simpair.cli.failures import fail, finish
from simpair.cli.store_options import (
    EmbeddingMemoryOption,
    EmbeddingStoreOption,
    OutputCacheOption,
    SentenceBatchOption,
)
from simpair.defaults import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MINE_EMBEDDING_MEMORY_MB,
    DEFAULT_MINE_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_SENTENCE_BATCH_ROWS,
)


def encode(
    input: Annotated[Path, typer.Option(help="Parquet file with one sentence per row.")],
    output: Annotated[Path, typer.Option(help="Parquet file to write (id, text, embedding).")],
    model: BiEncoderOption = DEFAULT_MINE_MODEL,
    column: SentenceColumnOption = "text",
    id_column: IdColumnOption = None,
    batch_size: SentenceBatchOption = DEFAULT_BATCH_SIZE,
    batch_rows: Annotated[
        int, typer.Option(min=1, help="Rows read, encoded and written at a time (bounds memory).")
    ] = DEFAULT_SENTENCE_BATCH_ROWS,
    threads: Annotated[int | None, typer.Option(min=1, help="Torch threads (default: the CPUs).")] = None,
    backend: BackendOption = "auto",
    precision: PrecisionOption = DEFAULT_PRECISION,
    embedding_store: EmbeddingStoreOption = True,
    embedding_cache: OutputCacheOption = None,
    embedding_memory_mb: EmbeddingMemoryOption = DEFAULT_MINE_EMBEDDING_MEMORY_MB,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
    strict: StrictOption = False,
) -> None:
    """Write every sentence's embedding (fixed-size float32 list) to Parquet, streamed by row batches.

    Rejected rows are kept with their reasons; with --strict they make the exit code 3.
    """
    from pydantic import ValidationError

    from simpair.mining.encode import encode_file
    from simpair.models.int8_check import Int8Refused
    from simpair.runtime.embedding_store import store_line
    from simpair.runtime.model_ref import resolve_model_ref
    from simpair.runtime.options import RuntimeOptions
    from simpair.settings import home_dir

    console = report_console(json_out)
    try:  # before the model resolves, so a wrong combination is a usage error
        runtime = RuntimeOptions(
            batch_size=batch_size, threads=threads, backend=backend, precision=precision,
            embedding_store=embedding_store,
            embedding_cache=embedding_cache, embedding_memory_mb=embedding_memory_mb,
        )  # fmt: skip
    except ValidationError as exc:
        raise typer.BadParameter(validation_message(exc)) from None
    require_registered(model, home_dir(home))
    try:
        ref = resolve_model_ref(model, home_dir(home))
    except LookupError as exc:  # registry: no such model/alias; a folder that is no model
        fail(str(exc), exc)
    try:
        summary = encode_file(
            input, output, ref, column=column, id_column=id_column, batch_rows=batch_rows, runtime=runtime,
            home=home_dir(home),
        )  # fmt: skip
    except Int8Refused as exc:  # the parity guard: figures, limits and what to do, in one line
        fail(f"not started: {exc}", exc)
    console.print(
        f"encoded {summary.encoded} of {summary.rows} rows with {summary.model} "
        f"({summary.dims} dims) into {summary.output} in {summary.seconds:.1f}s"
    )
    why = summary.precision_why or "asked with --precision"
    console.print(f"precision {summary.precision}: {escape(why)}")
    if summary.rejects:
        console.print(f"[yellow]{summary.rejected} rows rejected[/] (reasons in {summary.rejects})")
    store = store_line(summary)
    if store:
        console.print(f"embedding store: {store}")
    write_json(summary.model_dump(mode="json"), json_out)
    finish(strict, summary.rejected, f"{summary.rejected} rows rejected")


def register(app: typer.Typer) -> None:
    """Add `simpair encode` to the top-level app."""
    app.command("encode")(json_owns_stdout(encode))
