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
    train_pairs: pl.LazyFrame | None = None,
) -> set[str]:
    """Pair ids of `dataset/split` whose twin sits in the given training data.

    The training data is `train_pairs` (the frame `trained_pairs` reads) when given, else every pair
    of `train_splits` ("dataset/split" labels).
    """
    rows = leakage.filter((pl.col("dataset") == dataset) & (pl.col("split") == split))
    if train_pairs is not None:
        # stream the (possibly huge) list of trained pairs, keeping only the twins' ids
        twins = train_pairs.filter(pl.col("pair_id").is_in(rows["train_pair_id"].unique().implode()))
        rows = rows.join(
            twins.collect(engine="streaming"),
            left_on=["train_dataset", "train_split", "train_pair_id"],
            right_on=list(TRAINED_PAIRS_SCHEMA),
            how="semi",
        )
    else:
        source = pl.concat_str("train_dataset", "train_split", separator="/")
        rows = rows.filter(source.is_in(list(train_splits)))
    return set(rows["pair_id"].to_list())


TRAINED_PAIRS_SCHEMA = {"dataset": pl.String, "split": pl.String, "pair_id": pl.String}


def trained_pairs(model_dir: Path, metadata: Any) -> tuple[pl.LazyFrame | None, set[str]]:
    """(exact trained pairs as a lazy (dataset, split, pair_id) scan or None, trained 'dataset/split' labels).

    A lazy scan of the model's `train_pairs.txt`, not a set of tuples: a model trained on millions of
    pairs lists millions of ids, and callers only need the few that the leakage report names.
    """
    splits = set(metadata.train_datasets)
    path = model_dir / metadata.train_pairs_file if metadata.train_pairs_file else None
    if path is None or not path.is_file():
        return None, splits
    if path.stat().st_size <= 1:  # nothing trained on (an empty list is written as one newline)
        return pl.LazyFrame(schema=TRAINED_PAIRS_SCHEMA), splits
    scan = pl.scan_csv(path, separator="\t", has_header=False, quote_char=None, schema=TRAINED_PAIRS_SCHEMA)
    return scan, splits
