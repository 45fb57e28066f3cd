"""Which evaluation pairs leak from training data: the one filter over ingest's leakage report.

The ingest leakage report (`Catalog.leakage()`) lists every evaluation pair that also sits in a training
split. Evaluation excludes the pairs whose twin a model was trained on (its exact pairs when it lists
them, else its training splits); the promotion gate excludes those whose twin sits in any train-role
split, so every compared model is scored on the same pairs. Both ask `leaked_pair_ids`.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import polars as pl


def leaked_pair_ids(
    leakage: pl.DataFrame,
    dataset: str,
    split: str,
    *,
    train_splits: Collection[str] = (),
    train_pairs: Collection[tuple[str, str, str]] | None = None,
) -> set[str]:
    """Pair ids of `dataset/split` whose twin sits in the given training data.

    The training data is `train_pairs` ((dataset, split, pair_id) triples) when given, else every pair
    of `train_splits` ("dataset/split" labels).
    """
    rows = leakage.filter((pl.col("dataset") == dataset) & (pl.col("split") == split))
    if train_pairs is not None:
        twin = pl.concat_str("train_dataset", "train_split", "train_pair_id", separator="\t")
        rows = rows.filter(twin.is_in(["\t".join(p) for p in train_pairs]))
    else:
        source = pl.concat_str("train_dataset", "train_split", separator="/")
        rows = rows.filter(source.is_in(list(train_splits)))
    return set(rows["pair_id"].to_list())


def trained_pairs(model_dir: Path, metadata: Any) -> tuple[set[tuple[str, str, str]] | None, set[str]]:
    """(exact trained (dataset, split, pair_id) set or None, trained 'dataset/split' labels)."""
    splits = set(metadata.train_datasets)
    if metadata.train_pairs_file and (model_dir / metadata.train_pairs_file).is_file():
        rows = (model_dir / metadata.train_pairs_file).read_text().splitlines()
        exact = {tuple(r.split("\t")) for r in rows if r}
        return exact, splits  # type: ignore[return-value]
    return None, splits
