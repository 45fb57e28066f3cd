"""Prefect tasks for mining: each step of `simpair.mining.run.run_mine`, built from its declaration
(`simpair.tasks.stages.as_task`), so every task takes the same arguments as its step.

The `mine-pairs` flow runs the mining DAG with these tasks (and the shared `resolve-model` task of
`simpair.tasks.model_ref`). Caching is off: a pairs file depends on the files' contents and the
models' weights, not on the arguments' names, and every step is cheap to redo next to encoding. The
flow passes arguments quoted (`PrefectStages(..., quoted=True)`): they hold whole columns of texts
and arrays of vectors, which Prefect would otherwise walk element by element looking for futures.
"""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_markdown_artifact

from simpair.mining.run import (
    MineSummary,
    build_table,
    encode_sentences,
    find_pairs,
    rerank_pairs,
    write_mined,
)
from simpair.mining.sentences import read_sentences
from simpair.tasks.stages import as_task

read_sentences_task = as_task(read_sentences)
encode_sentences_task = as_task(encode_sentences)
# within the input, or in the corpus piece by piece (the corpus is encoded here, through the store)
find_pairs_task = as_task(find_pairs)
build_table_task = as_task(build_table)
rerank_pairs_task = as_task(rerank_pairs)


def summary_markdown(summary: MineSummary) -> str:
    """The summary as a two-column markdown table."""
    rows = "\n".join(f"| {key} | {value} |" for key, value in summary.model_dump().items())
    return f"# Mining run\n\n| field | value |\n|---|---|\n{rows}\n"


def _publish_summary(summary: MineSummary, _: dict[str, Any]) -> None:
    create_markdown_artifact(
        key="mine-summary",
        markdown=summary_markdown(summary),
        description=f"mined {summary.pairs} pairs with {summary.model}",
    )


# the pairs and rejects files, and the run's summary published as a markdown artifact
write_pairs_task = as_task(write_mined, then=_publish_summary)
