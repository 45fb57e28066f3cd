"""Prefect tasks for mining: each wraps one stage of `simpair.mining.run.run_mine`, nothing more.

`simpair.tasks.stages.PrefectStages` runs the mining DAG with each stage as its task here (and the
shared `resolve-model` task of `simpair.tasks.model_ref`).

Caching is off: a pairs file depends on the files' contents and the models' weights, not on the
arguments' names, and every stage is cheap to redo next to encoding. The flow passes arguments
quoted (`PrefectStages(..., quoted=True)`): they hold whole columns of texts and arrays of vectors,
which Prefect would otherwise walk element by element looking for futures.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from simpair.mining.encoder import Encoded
from simpair.mining.run import (
    MineSummary,
    build_table,
    encode_sentences,
    find_pairs,
    rerank_pairs,
    write_mined,
)
from simpair.mining.search import Candidates, MineOptions
from simpair.mining.sentences import Sentences, read_sentences
from simpair.runtime.embedding_store import StoreCounts
from simpair.runtime.model_ref import ModelRef


@task(name="read-sentences", task_run_name="read-{path}", cache_policy=NO_CACHE)
def read_sentences_task(path: str, column: str, id_column: str | None) -> Sentences:
    return read_sentences(path, column, id_column)


@task(name="encode-sentences", cache_policy=NO_CACHE)
def encode_sentences_task(
    model: ModelRef, sentences: Sentences, options: MineOptions, store: str | None
) -> Encoded:
    return encode_sentences(model, sentences, options, store)


@task(name="find-pairs", cache_policy=NO_CACHE)
def find_pairs_task(
    vectors: np.ndarray, model: ModelRef, corpus: Sentences | None, options: MineOptions, store: str | None
) -> Candidates:
    """Within the input, or in the corpus piece by piece (the corpus is encoded here, through the store)."""
    return find_pairs(vectors, model, corpus, options, store)


@task(name="pairs-table", cache_policy=NO_CACHE)
def build_table_task(
    candidates: Candidates, inputs: Sentences, corpus: Sentences | None, model: ModelRef
) -> pa.Table:
    return build_table(candidates, inputs, corpus, model)


@task(name="rerank-pairs", cache_policy=NO_CACHE)
def rerank_pairs_task(table: pa.Table, reranker: ModelRef, options: MineOptions) -> pa.Table:
    return rerank_pairs(table, reranker, options)


@task(name="write-pairs", cache_policy=NO_CACHE)
def write_pairs_task(
    table: pa.Table,
    output: str,
    inputs: Sentences,
    corpus: Sentences | None,
    candidates: Candidates,
    model: ModelRef,
    reranker: ModelRef | None,
    options: MineOptions,
    started: float,
    encoding: StoreCounts,
    precisions: dict[str, str | None] | None = None,
) -> MineSummary:
    """Write the pairs and rejects files and publish the run's summary as a markdown artifact."""
    summary = write_mined(
        table, output, inputs, corpus, candidates, model, reranker, options, started, encoding, precisions
    )
    create_markdown_artifact(
        key="mine-summary",
        markdown=summary_markdown(summary),
        description=f"mined {summary.pairs} pairs with {summary.model}",
    )
    return summary


def summary_markdown(summary: MineSummary) -> str:
    """The summary as a two-column markdown table."""
    rows = "\n".join(f"| {key} | {value} |" for key, value in summary.model_dump().items())
    return f"# Mining run\n\n| field | value |\n|---|---|\n{rows}\n"
