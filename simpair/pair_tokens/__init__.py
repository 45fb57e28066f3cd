"""Tokenized pairs (`PairTokens`), read from the token cache (`simpair.tokens`) without copying ids.

One row per pair: its ids in the cache's form (cross: joint input both ways; bi: each text alone),
its target and its 0/1 label. Training, dev scoring and `evaluate_model` all read pairs this way.
`open_pairs` memory-maps a cache file's columns (`columns`: built once beside it, so resident memory
stays flat at any size); `tokens_to_pairs` builds the same from a table already in memory. A
`PairTokens` is an index view over those columns (`view`), so subsets, concatenations and the
swapped copy of symmetric training cost a few bytes per pair.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from simpair.pair_tokens.columns import Ragged, TokenFile, open_token_file, token_file_from_table
from simpair.pair_tokens.view import PairTokens, TokenInput

__all__ = [
    "PairTokens",
    "Ragged",
    "TokenFile",
    "TokenInput",
    "open_pairs",
    "open_token_file",
    "tokens_to_pairs",
]


def open_pairs(path: str | Path, task: str, dataset: str, split: str) -> PairTokens:
    """Every pair of one cache file, over its memory-mapped columns."""
    return PairTokens.from_file(open_token_file(path), task, dataset, split)


def tokens_to_pairs(frame: pl.DataFrame, form: str, task: str, dataset: str, split: str) -> PairTokens:
    """Cache table (in memory) -> PairTokens. Target: the label for paraphrase (score if unlabelled),
    else the score."""
    file = token_file_from_table(frame.to_arrow())
    if file.form != form:
        raise ValueError(f"{dataset}/{split}: the table holds {file.form} tokens, not {form}")
    return PairTokens.from_file(file, task, dataset, split)
