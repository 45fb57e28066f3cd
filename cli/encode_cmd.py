"""CLI command `simpair encode`: a bi-encoder's sentence embeddings for a Parquet file of sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from simpair.cli.common import (
    EXIT_INT8_REFUSED,
    EXIT_NO_MODEL,
    BackendOption,
    BiEncoderOption,
    HomeOption,
    IdColumnOption,
    PrecisionOption,
    SentenceColumnOption,
    validation_message,
)
from simpair.cli.store_options import (
    EmbeddingMemoryOption,
    EmbeddingStoreOption,
    OutputCacheOption,
    SentenceBatchOption,
)
from simpair.defaults import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MINE_EMBEDDING_MEMORY_MB,
    DEFAULT_PRECISION,
    DEFAULT_SENTENCE_BATCH_ROWS,
)


def encode(
    model: BiEncoderOption,
    input: Annotated[Path, typer.Option(help="Parquet file with one sentence per row.")],
    output: Annotated[Path, typer.Option(help="Parquet file to write (id, text, embedding).")],
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
) -> None:
    """Write every sentence's embedding (fixed-size float32 list) to Parquet, streamed by row batches."""
    from pydantic import ValidationError

    from simpair.mining.encode import encode_file
    from simpair.model_ref import resolve_model_ref
    from simpair.runtime.embedding_store import store_line
    from simpair.runtime.int8_guard import Int8Refused
    from simpair.runtime.options import RuntimeOptions
    from simpair.settings import home_dir

    console = Console()
    try:  # before the model resolves, so a wrong combination is a usage error
        runtime = RuntimeOptions(
            batch_size=batch_size, threads=threads, backend=backend, precision=precision,
            embedding_store=embedding_store,
            embedding_cache=embedding_cache, embedding_memory_mb=embedding_memory_mb,
        )  # fmt: skip
    except ValidationError as exc:
        raise typer.BadParameter(validation_message(exc)) from None
    try:
        ref = resolve_model_ref(model, home_dir(home))
    except LookupError as exc:
        console.print(f"[red]no model:[/] {exc}")
        raise typer.Exit(EXIT_NO_MODEL) from None
    try:
        summary = encode_file(
            input, output, ref, column=column, id_column=id_column, batch_rows=batch_rows, runtime=runtime,
            home=home_dir(home),
        )  # fmt: skip
    except Int8Refused as exc:  # the parity guard: figures, limits and what to do, in one line
        console.print(f"[red]not started:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INT8_REFUSED) from None
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


def register(app: typer.Typer) -> None:
    """Add `simpair encode` to the top-level app."""
    app.command("encode")(encode)
