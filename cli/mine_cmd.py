"""CLI commands that run a bi-encoder over files of sentences: `simpair mine` and `simpair encode`.

`mine`: paraphrase mining within a file, or semantic search of it in a corpus. It runs in this process
by default (mining is one job on one machine); `--prefect` runs the same stages as the `mine-pairs`
flow, with a flow run and task runs to look at. Prefect is imported only then.

`encode`: every sentence's embedding, written to Parquet.

Both take the same sentence, model and runtime options, declared once (`cli/common.py`,
`cli/store_options.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from simpair.cli.common import (
    BiEncoderOption,
    HomeOption,
    IdColumnOption,
    JsonOutOption,
    SentenceColumnOption,
    StrictOption,
    check_model_first,
    json_owns_stdout,
    report_console,
    require_registered,
    usage_checked,
    write_json,
)
from simpair.cli.failures import finish, job_refusals
from simpair.cli.store_options import (
    FORWARD_PASS,
    ForwardPass,
    OutputCacheOption,
    SentenceBatchOption,
    forward_pass_options,
)
from simpair.defaults import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MINE_EMBEDDING_MEMORY_MB,
    DEFAULT_MINE_MEMORY_MB,
    DEFAULT_MINE_MODEL,
    DEFAULT_SENTENCE_BATCH_ROWS,
    INDEX_METHODS,
)

if TYPE_CHECKING:
    from simpair.mining.run import MineSummary


def describe(summary: MineSummary) -> str:
    """The run in two lines: what was read, what was found."""
    from simpair.runtime.embedding_store import store_line

    read = (
        f"{summary.input_rows} input rows ({summary.input_rejected} rejected, "
        f"{summary.input_distinct} distinct)"
    )
    if summary.corpus_rows is not None:
        read += (
            f", {summary.corpus_rows} corpus rows ({summary.corpus_rejected} rejected, "
            f"{summary.corpus_distinct} distinct)"
        )
    found = (
        f"{summary.pairs} pairs ({summary.mode}) with {summary.model}"
        + (f", re-ranked by {summary.rerank_model}" if summary.rerank_model else "")
        + f"; {summary.index} search in {summary.pieces} piece(s), {summary.seconds:.1f}s -> {summary.output}"
    )
    store = store_line(summary)
    precision = f"precision {summary.precision}: {summary.precision_why or 'asked with --precision'}"
    if summary.rerank_precision:
        why = summary.rerank_precision_why or "asked with --precision"
        precision += f"; re-ranker {summary.rerank_precision}: {why}"
    return f"{read}\n{found}\n{precision}" + (f"\nembedding store: {store}" if store else "")


@forward_pass_options(cache=OutputCacheOption, memory_mb=DEFAULT_MINE_EMBEDDING_MEMORY_MB)
def mine(
    input: Annotated[Path, typer.Option(help="Parquet file of sentences (the queries).")],
    output: Annotated[Path, typer.Option(help="Parquet file of pairs to write.")],
    top_k: Annotated[int, typer.Option(min=1, help="Neighbours kept per sentence.")] = 10,
    corpus: Annotated[
        Path | None,
        typer.Option(help="Search each input sentence in this corpus (default: mine within the input)."),
    ] = None,
    threshold: Annotated[
        float | None, typer.Option(help="Keep pairs with a bi-encoder score >= this.")
    ] = None,
    model: BiEncoderOption = DEFAULT_MINE_MODEL,
    rerank: Annotated[
        str | None,
        typer.Option(
            help="Cross-encoder adding rerank_score to every pair (e.g. simpair-paraphrase@champion)."
        ),
    ] = None,
    column: SentenceColumnOption = "text",
    id_column: IdColumnOption = None,
    corpus_column: Annotated[
        str | None, typer.Option(help="The corpus's text column (default: --column).")
    ] = None,
    corpus_id_column: Annotated[
        str | None, typer.Option(help="The corpus's id column (default: --id-column).")
    ] = None,
    index: Annotated[
        str,
        typer.Option(help=f"Search: {', '.join(INDEX_METHODS)} (auto: exact for small pieces, else HNSW)."),
    ] = "auto",
    max_memory_mb: Annotated[
        float,
        typer.Option(min=0.001, help="Memory for corpus vectors and index; larger corpora go in pieces."),
    ] = DEFAULT_MINE_MEMORY_MB,
    batch_size: SentenceBatchOption = DEFAULT_BATCH_SIZE,
    threads: Annotated[int | None, typer.Option(min=1, help="Torch and faiss threads.")] = None,
    forward: ForwardPass = FORWARD_PASS,
    home: HomeOption = None,
    prefect: Annotated[bool, typer.Option(help="Run as the `mine-pairs` Prefect flow.")] = False,
    json_out: JsonOutOption = None,
    strict: StrictOption = False,
) -> None:
    """Find similar sentence pairs (bi-encoder + exact or HNSW search), optionally re-ranked.

    Rejected rows are kept with their reasons; with --strict they make the exit code 3.
    """
    from simpair import settings
    from simpair.mining.search import MineOptions

    console = report_console(json_out)
    options = usage_checked(
        MineOptions, top_k=top_k, threshold=threshold, index=index, max_memory_mb=max_memory_mb,
        batch_size=batch_size, threads=threads, column=column, id_column=id_column,
        corpus_column=corpus_column, corpus_id_column=corpus_id_column, **forward.fields(),
    )  # fmt: skip
    if index not in INDEX_METHODS:
        raise typer.BadParameter(f"--index must be one of {', '.join(INDEX_METHODS)}; got {index!r}")
    for spec in (model, rerank):  # a model that is not there fails here, before any work
        if spec:
            check_model_first(spec, settings.home_dir(home), flow=prefect)
    kwargs = dict(corpus=corpus, model=model, rerank_model=rerank, home=home, options=options)
    with job_refusals():
        if prefect:
            from simpair.cli.failures import quiet_prefect_console
            from simpair.flows.launch import mine as run_flow

            quiet_prefect_console()
            summary = run_flow(input, output, **kwargs)
        else:
            from simpair.mining.run import run_mine

            summary = run_mine(input, output, **kwargs)
    console.print(escape(describe(summary)))
    if summary.rejects:
        console.print(f"[yellow]rejected rows[/] (with reasons) in {escape(str(summary.rejects))}")
    write_json(summary.model_dump(mode="json"), json_out)
    rejected = summary.input_rejected + (summary.corpus_rejected or 0)
    finish(strict, rejected, f"{rejected} rows rejected")


@forward_pass_options(cache=OutputCacheOption, memory_mb=DEFAULT_MINE_EMBEDDING_MEMORY_MB)
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
    forward: ForwardPass = FORWARD_PASS,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
    strict: StrictOption = False,
) -> None:
    """Write every sentence's embedding (fixed-size float32 list) to Parquet, streamed by row batches.

    Rejected rows are kept with their reasons; with --strict they make the exit code 3.
    """
    from simpair.mining.encode import encode_file
    from simpair.runtime.embedding_store import store_line
    from simpair.runtime.model_ref import resolve_model_ref
    from simpair.runtime.options import RuntimeOptions
    from simpair.settings import home_dir

    console = report_console(json_out)
    runtime = usage_checked(RuntimeOptions, batch_size=batch_size, threads=threads, **forward.fields())
    require_registered(model, home_dir(home))
    with job_refusals():
        ref = resolve_model_ref(model, home_dir(home))
        summary = encode_file(
            input, output, ref, column=column, id_column=id_column, batch_rows=batch_rows, runtime=runtime,
            home=home_dir(home),
        )  # fmt: skip
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
    """Add `simpair encode` and `simpair mine` to the top-level app (in that order)."""
    app.command("encode")(json_owns_stdout(encode))
    app.command("mine")(json_owns_stdout(mine))
