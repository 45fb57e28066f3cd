"""Tokenized pairs in memory (`PairTokens`), built from a token-cache table (`simpair.tokens`).

One row per pair: its ids in the cache's form (cross: joint input both ways; bi: each text alone),
its target and its 0/1 label. Training, dev scoring and `evaluate_model` all read pairs this way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass
class PairTokens:
    """Tokenized pairs of one form with their targets, in memory."""

    form: str
    dataset: list[str]
    split: list[str]
    pair_ids: list[str]
    targets: np.ndarray
    labels: np.ndarray  # int 0/1 where known, -1 otherwise (for stratification and metrics)
    cols: dict[str, list[list[int]]]
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.pair_ids)

    def subset(self, idx: np.ndarray | list[int]) -> PairTokens:
        idx = list(np.asarray(idx, dtype=np.int64))
        return PairTokens(
            form=self.form,
            dataset=[self.dataset[i] for i in idx],
            split=[self.split[i] for i in idx],
            pair_ids=[self.pair_ids[i] for i in idx],
            targets=self.targets[idx],
            labels=self.labels[idx],
            cols={k: [v[i] for i in idx] for k, v in self.cols.items()},
            lengths=self.lengths[idx],
        )

    def swapped(self) -> PairTokens:
        """The same pairs in (b, a) order (symmetric training)."""
        cols = dict(self.cols)
        if self.form == "cross":
            cols["input_ids"], cols["input_ids_ba"] = self.cols["input_ids_ba"], self.cols["input_ids"]
            cols["token_type_ids"], cols["token_type_ids_ba"] = (
                self.cols["token_type_ids_ba"],
                self.cols["token_type_ids"],
            )
        else:
            cols["ids_a"], cols["ids_b"] = self.cols["ids_b"], self.cols["ids_a"]
        return PairTokens(
            self.form, self.dataset, self.split, self.pair_ids, self.targets, self.labels, cols, self.lengths
        )

    @staticmethod
    def concat(parts: list[PairTokens]) -> PairTokens:
        first = parts[0]
        return PairTokens(
            form=first.form,
            dataset=[x for p in parts for x in p.dataset],
            split=[x for p in parts for x in p.split],
            pair_ids=[x for p in parts for x in p.pair_ids],
            targets=np.concatenate([p.targets for p in parts]),
            labels=np.concatenate([p.labels for p in parts]),
            cols={k: [x for p in parts for x in p.cols[k]] for k in first.cols},
            lengths=np.concatenate([p.lengths for p in parts]),
        )


def tokens_to_pairs(frame: pl.DataFrame, form: str, task: str, dataset: str, split: str) -> PairTokens:
    """Cache table -> PairTokens. Target: the label for paraphrase (score if unlabelled), else the score."""
    label = frame["label"].to_numpy().astype(np.float32) if frame["label"].null_count() == 0 else None
    score = frame["score"].to_numpy().astype(np.float32) if frame["score"].null_count() == 0 else None
    if label is None and score is None:
        raise ValueError(f"{dataset}/{split}: rows have neither a label nor a score in every row")
    if task == "paraphrase":
        targets = label if label is not None else score
    else:
        targets = score if score is not None else label
    labels = label.astype(np.int64) if label is not None else np.full(len(frame), -1, dtype=np.int64)
    if form == "cross":
        keys = ["input_ids", "token_type_ids", "input_ids_ba", "token_type_ids_ba"]
        lengths = frame["length"].to_numpy()
    else:
        keys = ["ids_a", "ids_b"]
        lengths = np.maximum(frame["length_a"].to_numpy(), frame["length_b"].to_numpy())
    n = len(frame)
    return PairTokens(
        form=form,
        dataset=[dataset] * n,
        split=[split] * n,
        pair_ids=frame["pair_id"].to_list(),
        targets=np.asarray(targets, dtype=np.float32),
        labels=labels,
        cols={k: frame[k].to_list() for k in keys},
        lengths=lengths.astype(np.int64),
    )
