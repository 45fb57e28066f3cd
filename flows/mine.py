"""The `mine-pairs` flow: similar sentence pairs within a file, or each sentence's neighbours in a corpus.

The DAG is `simpair.mining.run.run_mine`, the same one `simpair mine` runs in process; this flow
runs each of its steps as its Prefect task (`simpair.tasks.mine`, built from the step's
declaration), listed below in the DAG's order:

    resolve-model (bi-encoder; and the re-ranker) -> read-sentences (input; and corpus)
    -> encode-sentences -> find-pairs (exact or HNSW, corpus pieces within the memory budget)
    -> pairs-table -> rerank-pairs (if asked) -> write-pairs (+ the `mine-summary` artifact)

Stages run one after the other: each needs the one before, and encoding, the bulk of the time,
already uses every core torch is given.
"""

from __future__ import annotations

from prefect import flow

from simpair.mining.run import MineSummary, run_mine
from simpair.mining.search import MineOptions
from simpair.tasks.mine import (
    build_table_task,
    encode_sentences_task,
    find_pairs_task,
    read_sentences_task,
    rerank_pairs_task,
    write_pairs_task,
)
from simpair.tasks.model_ref import resolve_model_task
from simpair.tasks.stages import PrefectStages

# the mining DAG's steps, each as its Prefect task, in the order `run_mine` runs them
STEPS = PrefectStages(
    [
        resolve_model_task,  # the bi-encoder; and the re-ranker
        read_sentences_task,  # the input; and the corpus
        encode_sentences_task,
        find_pairs_task,
        build_table_task,
        rerank_pairs_task,  # if asked
        write_pairs_task,  # the pairs, the rejects and the `mine-summary` artifact
    ],
    quoted=True,  # arguments hold columns of texts and arrays of vectors
)


@flow(name="mine-pairs", log_prints=True)
def mine_pairs(
    input: str,
    output: str,
    corpus: str | None = None,
    model: str | None = None,
    rerank: str | None = None,
    home: str | None = None,
    options: MineOptions | None = None,
) -> MineSummary:
    """Mine `input` into `output` (see docs/mining.md); `corpus` switches to semantic search."""
    summary = run_mine(
        input,
        output,
        corpus=corpus,
        model=model,
        rerank_model=rerank,
        home=home,
        options=options,
        runner=STEPS,
    )
    print(f"mined {summary.pairs} pairs ({summary.mode}) with {summary.model} into {summary.output}")
    return summary
