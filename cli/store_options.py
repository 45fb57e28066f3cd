"""The runtime options `simpair score`, `simpair mine` and `simpair encode` share (`RuntimeOptions`).

One definition, so the three commands spell and explain the embedding store (and the sentence batch
of the two that embed sentences) the same way; only the default folder (and the memory default)
differ per command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

SentenceBatchOption = Annotated[int, typer.Option(min=1, help="Sentences per forward pass.")]
EmbeddingStoreOption = Annotated[
    bool,
    typer.Option(
        help="Keep sentence vectors in a store for the whole run, so each distinct sentence is "
        "encoded once and a rerun after a kill reuses them (off: no store; bi-encoder scoring "
        "then dedups within a chunk only)."
    ),
]
EmbeddingMemoryOption = Annotated[
    float, typer.Option(min=0.001, help="Embedding store memory bound per process, MB (more goes to disk).")
]
_CACHE_HELP = (
    "Keep the embedding store in DIR across runs (one file per model version, weights, precision "
    "and forward pass; `simpair score`, `mine` and `encode` can share it). Default: {where}, "
    "removed when the run finishes."
)
ScoreCacheOption = Annotated[
    Path | None, typer.Option(metavar="DIR", help=_CACHE_HELP.format(where="<out>/_ledger/embeddings"))
]
OutputCacheOption = Annotated[
    Path | None, typer.Option(metavar="DIR", help=_CACHE_HELP.format(where="<output>.embeddings"))
]
