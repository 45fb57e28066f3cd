"""The mining DAG, written once: `simpair mine` runs it in process, the `mine-pairs` flow as Prefect tasks.

    resolve-model (bi; and the re-ranker) -> read-sentences (input; and corpus)
    -> encode-sentences (distinct input texts) -> find-pairs (within the input, or in the corpus,
    piece by piece) -> pairs-table -> rerank-pairs (if asked) -> write-pairs -> release the store

Each stage is a plain function of plain values; the runner (`simpair.stages`) decides how it runs
(`InProcess` here, `simpair.tasks.stages.PrefectStages` in `flows/mine.py`), as scoring does. Texts
are mined once per distinct text: a text on several rows is reported with the id of its first row.
Encoding goes through the embedding store (`simpair.runtime.stored_predict.StoredEncoder`); a
finished run removes its own store, a killed run leaves it for the rerun, a store given as
`embedding_cache` is kept.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from simpair.defaults import DEFAULT_MINE_MODEL
from simpair.mining.encoder import (
    Encoded,
    bi_encoder,
    check_bi_encoder,
    check_reranker,
    embed_all,
    load_reranker,
    output_store,
    resolve_precision,
)
from simpair.mining.pairs import first_ids, pairs_table, rerank, write_pairs, write_rejects
from simpair.mining.search import Candidates, MineOptions, search_corpus, search_within
from simpair.mining.sentences import Sentences, distinct, read_sentences
from simpair.runtime.embedding_store import StoreCounts, release_store
from simpair.runtime.model_ref import ModelRef, resolve_model_ref
from simpair.settings import home_dir
from simpair.stages import InProcess, StageRunner, step

# summary fields about this run, not about the pairs: kept out of the pairs file's metadata
RUN_ONLY = {
    "output", "rejects", "seconds", "embedding_store", "embedding_store_kept", "sentences_encoded",
    "embedding_memory_hits", "embedding_disk_hits", "precision_why", "rerank_precision_why",
}  # fmt: skip


class MineSummary(BaseModel):
    """What a mining run did (printed by the command, returned by the flow)."""

    output: str
    rejects: str | None
    mode: str
    model: str
    rerank_model: str | None
    input_rows: int
    input_rejected: int
    input_distinct: int
    corpus_rows: int | None
    corpus_rejected: int | None
    corpus_distinct: int | None
    pairs: int
    pieces: int
    index: str
    seconds: float
    embedding_store: str | None = None  # the store's folder; None when off
    embedding_store_kept: bool = False  # kept across runs (`embedding_cache`), else removed at the end
    sentences_encoded: int = 0  # distinct texts the encoder ran on (store misses)
    embedding_memory_hits: int = 0
    embedding_disk_hits: int = 0
    precision: str = "fp32"  # the bi-encoder's, resolved once per run (never auto)
    precision_why: str | None = None  # with auto: which rung its verdict chose, and why
    rerank_precision: str | None = None
    rerank_precision_why: str | None = None


@step("encode-sentences")
def encode_sentences(
    model: ModelRef, sentences: Sentences, options: MineOptions, store: str | None = None
) -> Encoded:
    """Vectors of the distinct input texts, in first-seen order (through the store in `store`)."""
    texts, _ = distinct(sentences.texts)
    encoder = bi_encoder(model, options, store, job="simpair mine")
    vectors = embed_all(
        encoder,
        texts,
        chunk=options.encode_chunk,
        batch_size=options.batch_size,
        desc="encode input",
        show_progress=options.show_progress,
    )
    return Encoded(vectors, encoder.counts)


@step("find-pairs")
def find_pairs(
    vectors: np.ndarray,
    model: ModelRef,
    corpus: Sentences | None,
    options: MineOptions,
    store: str | None = None,
) -> Candidates:
    """Within the input (no corpus) or each input text's top k in the corpus's distinct texts."""
    if corpus is None:
        return search_within(vectors, options)
    texts, _ = distinct(corpus.texts)
    encoder = bi_encoder(model, options, store, job="simpair mine")
    candidates = search_corpus(vectors, encoder, texts, options)
    candidates.encoding = encoder.counts
    return candidates


@step("pairs-table")
def build_table(
    candidates: Candidates, inputs: Sentences, corpus: Sentences | None, model: ModelRef
) -> pa.Table:
    """The found pairs with ids and texts of both sides (see `simpair.mining.pairs.pairs_table`)."""
    a_texts, a_inverse = distinct(inputs.texts)
    a_ids = first_ids(inputs.ids, a_inverse, len(a_texts))
    if corpus is None:
        return pairs_table(candidates, a_ids, a_texts, a_ids, a_texts, model)
    b_texts, b_inverse = distinct(corpus.texts)
    return pairs_table(
        candidates, a_ids, a_texts, first_ids(corpus.ids, b_inverse, len(b_texts)), b_texts, model
    )


@step("rerank-pairs")
def rerank_pairs(table: pa.Table, reranker: ModelRef, options: MineOptions) -> pa.Table:
    """Add the re-ranker's scores (see `simpair.mining.pairs.rerank`)."""
    return rerank(table, load_reranker(reranker, options), reranker, options)


@step("write-pairs")
def write_mined(
    table: pa.Table,
    output: str,
    inputs: Sentences,
    corpus: Sentences | None,
    candidates: Candidates,
    model: ModelRef,
    reranker: ModelRef | None,
    options: MineOptions,
    started: float,
    encoding: StoreCounts | None = None,
    precisions: dict[str, str | None] | None = None,
) -> MineSummary:
    """The pairs file (with how it was mined in its metadata), the rejects file, and the summary.

    `precisions`: why auto chose the bi-encoder's precision, and the re-ranker's precision and why
    (`precision_why`, `rerank_precision`, `rerank_precision_why`), as `run_mine` resolved them."""
    rejected = {"input": inputs.rejects} | ({"corpus": corpus.rejects} if corpus is not None else {})
    rejects = write_rejects(output, rejected)
    summary = MineSummary(
        output=str(output),
        rejects=str(rejects) if rejects else None,
        mode="paraphrase" if corpus is None else "search",
        model=model.label,
        rerank_model=reranker.label if reranker else None,
        input_rows=len(inputs) + len(inputs.rejects),
        input_rejected=len(inputs.rejects),
        input_distinct=len(set(inputs.texts)),
        corpus_rows=None if corpus is None else len(corpus) + len(corpus.rejects),
        corpus_rejected=None if corpus is None else len(corpus.rejects),
        corpus_distinct=None if corpus is None else len(set(corpus.texts)),
        pairs=table.num_rows,
        pieces=candidates.pieces,
        index=candidates.method,
        seconds=round(time.monotonic() - started, 3),
        precision=options.precision,
        **(precisions or {}),
    )
    store = output_store(output, options)
    if store is not None:
        summary.embedding_store, summary.embedding_store_kept = str(store), options.keeps_store
    encoding = encoding or StoreCounts()
    summary.sentences_encoded = encoding.encoded
    summary.embedding_memory_hits, summary.embedding_disk_hits = encoding.memory_hits, encoding.disk_hits
    meta = summary.model_dump(exclude=RUN_ONLY) | {
        "top_k": options.top_k,
        "threshold": options.threshold,
        "model_version": model.version,
        "rerank_version": reranker.version if reranker else None,
    }
    write_pairs(table, output, meta)
    return summary


def run_mine(
    input: str | Path,
    output: str | Path,
    *,
    corpus: str | Path | None = None,
    model: str | None = None,
    rerank_model: str | None = None,
    home: str | Path | None = None,
    options: MineOptions | None = None,
    runner: StageRunner | None = None,
) -> MineSummary:
    """Mine `input` (within itself, or against `corpus`) into `output`; see docs/mining.md."""
    runner = runner or InProcess()
    options = options or MineOptions()
    started = time.monotonic()
    home_path = home_dir(home)
    bi = runner.run(resolve_model_ref, spec=model or DEFAULT_MINE_MODEL, home=home_path)
    reranker = runner.run(resolve_model_ref, spec=rerank_model, home=home_path) if rerank_model else None
    # each model's precision decided once, here, before any stage loads it (as `simpair score` does)
    check_bi_encoder(bi, "simpair mine")
    if reranker is not None:
        check_reranker(reranker)
    asked = options
    options, why = resolve_precision(bi, asked, home_path)
    rerank_options, rerank_why = resolve_precision(reranker, asked, home_path) if reranker else (asked, None)
    inputs = runner.run(read_sentences, path=str(input), column=options.column, id_column=options.id_column)
    corpus_sentences = None
    if corpus is not None:
        corpus_sentences = runner.run(
            read_sentences,
            path=str(corpus),
            column=options.corpus_column or options.column,
            id_column=options.corpus_id_column or options.id_column,
        )
    folder = output_store(output, options)
    store = str(folder) if folder else None
    encoded = runner.run(encode_sentences, model=bi, sentences=inputs, options=options, store=store)
    candidates = runner.run(
        find_pairs, vectors=encoded.vectors, model=bi, corpus=corpus_sentences, options=options, store=store
    )
    encoding = StoreCounts()
    encoding.add(encoded.counts)
    encoding.add(candidates.encoding)
    table = runner.run(build_table, candidates=candidates, inputs=inputs, corpus=corpus_sentences, model=bi)
    if reranker is not None:
        table = runner.run(rerank_pairs, table=table, reranker=reranker, options=rerank_options)
    summary = runner.run(
        write_mined,
        table=table,
        output=str(output),
        inputs=inputs,
        corpus=corpus_sentences,
        candidates=candidates,
        model=bi,
        reranker=reranker,
        options=options,
        started=started,
        encoding=encoding,
        precisions={
            "precision_why": why,
            "rerank_precision": rerank_options.precision if reranker else None,
            "rerank_precision_why": rerank_why,
        },
    )
    if folder is not None:
        release_store(folder, keep=options.keeps_store)
    return summary
