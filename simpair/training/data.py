"""Training and dev data from the token cache: leakage exclusion, dev carving, batching.

Everything here works on pre-tokenized ids (never re-tokenizes per batch), read through memory-mapped
columns (`simpair.pair_tokens`): the pairs are index views, and a batch's ids are read when it is
collated, so the data's resident memory stays flat at any size. Batches are padded only to their own
longest sequence, and with length grouping a batch holds sequences of similar length, so little
compute goes to padding (the HF Trainer's `group_by_length` idea). Grouping reads only the lengths.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import torch
from sklearn.model_selection import train_test_split
from transformers import PreTrainedTokenizerBase

from simpair.catalog import Catalog
from simpair.pair_tokens import PairTokens, open_pairs
from simpair.tokens import pretokenize
from simpair.training.config import SplitRef, TrainConfig

log = logging.getLogger(__name__)


@dataclass
class TrainData:
    train: PairTokens
    dev: PairTokens
    dev_source: str
    versions: dict[str, str]
    excluded_leaked: dict[str, int] = field(default_factory=dict)
    token_keys: dict[str, str] = field(default_factory=dict)


def _load(
    ref: SplitRef, home: Path, tokenizer: PreTrainedTokenizerBase, config: TrainConfig
) -> tuple[PairTokens, str, str]:
    ts = pretokenize(home, ref.dataset, ref.split, tokenizer, config.max_length, config.kind, ref.version)
    pairs = open_pairs(ts.path, config.task, ref.dataset, ref.split)
    if ref.exclude_pair_ids is not None:
        ids = pl.from_arrow(pairs.pair_id_array())
        held_out = ids.str.contains(ref.exclude_pair_ids).to_numpy()
        pattern = ref.exclude_pair_ids
        log.info("left out %d pairs of %s matching %r", int(held_out.sum()), ref.label(), pattern)
        pairs = pairs.subset(np.flatnonzero(~held_out))
        if len(pairs) == 0:
            raise ValueError(f"{ref.label()}: exclude_pair_ids {ref.exclude_pair_ids!r} leaves no pair")
    return pairs, ts.version, ts.key


def carve_dev(pairs: PairTokens, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train_idx, dev_idx): a fixed, seeded split stratified on the label (or on score quintiles)."""
    idx = np.arange(len(pairs))
    if (pairs.labels >= 0).all():
        strata = pairs.labels
    else:
        strata = np.digitize(pairs.targets, np.quantile(pairs.targets, [0.2, 0.4, 0.6, 0.8]))
    train_idx, dev_idx = train_test_split(idx, test_size=fraction, random_state=seed, stratify=strata)
    return np.sort(train_idx), np.sort(dev_idx)


def leaked_train_ids(home: Path, eval_refs: list[SplitRef]) -> set[tuple[str, str, str]]:
    """(train_dataset, train_split, train_pair_id) of every train pair that also sits in an eval split."""
    if not eval_refs:
        return set()
    leak = Catalog(home).leakage()
    wanted = pl.DataFrame({"dataset": [r.dataset for r in eval_refs], "split": [r.split for r in eval_refs]})
    hits = leak.join(wanted, on=["dataset", "split"], how="inner")
    return set(hits.select("train_dataset", "train_split", "train_pair_id").iter_rows())


def load_train_data(config: TrainConfig, home: Path, tokenizer: PreTrainedTokenizerBase) -> TrainData:
    """Tokens for train and dev, with leaked pairs removed from train and the dev split fixed."""
    versions: dict[str, str] = {}
    keys: dict[str, str] = {}
    parts: list[PairTokens] = []
    for ref in config.train:
        pairs, version, key = _load(ref, home, tokenizer, config)
        versions[ref.dataset] = version
        keys[ref.label()] = key
        parts.append(pairs)

    dev_cfg = config.dev
    protected = list(config.evaluate_on)
    if dev_cfg.split is not None:
        dev_ref = SplitRef(
            dataset=dev_cfg.dataset or config.train[0].dataset,
            split=dev_cfg.split,
            exclude_pair_ids=dev_cfg.exclude_pair_ids,
        )
        dev, version, key = _load(dev_ref, home, tokenizer, config)
        versions[dev_ref.dataset] = version
        keys[dev_ref.label()] = key
        dev_source = dev_ref.label()
        protected.append(dev_ref)
    else:
        carve_from = dev_cfg.dataset or config.train[0].dataset
        pos = next((i for i, r in enumerate(config.train) if r.dataset == carve_from), None)
        if pos is None:
            raise ValueError(f"dev: cannot carve from {carve_from!r}, it is not among the train splits")
        train_idx, dev_idx = carve_dev(parts[pos], dev_cfg.carve_fraction, dev_cfg.carve_seed)
        dev = parts[pos].subset(dev_idx)
        parts[pos] = parts[pos].subset(train_idx)
        dev_source = (
            f"{config.train[pos].label()} carved {dev_cfg.carve_fraction:g} seed {dev_cfg.carve_seed}"
        )

    leaked = leaked_train_ids(home, protected)
    excluded: dict[str, int] = {}
    for i, (part, ref) in enumerate(zip(parts, config.train, strict=True)):
        ids = [p for d, s, p in leaked if (d, s) == (ref.dataset, ref.split)]
        if not ids:
            continue
        hit = pc.is_in(part.pair_id_array(), value_set=pa.array(ids, type=pa.large_string()))
        keep = np.flatnonzero(~hit.to_numpy(zero_copy_only=False))
        dropped = len(part) - len(keep)
        if dropped:
            label = ref.label()
            excluded[label] = excluded.get(label, 0) + dropped
            log.info("excluded %d pairs of %s that also sit in evaluation splits", dropped, label)
        parts[i] = part.subset(keep)
    for i, ref in enumerate(config.train):
        if ref.repeat > 1:  # index views: the same token rows read again, no copy
            parts[i] = parts[i].subset(np.tile(np.arange(len(parts[i])), ref.repeat))
    train = PairTokens.concat(parts)
    return TrainData(train, dev, dev_source, versions, excluded, keys)


def length_grouped_batches(
    lengths: np.ndarray,
    batch_size: int,
    seed: int,
    group: bool = True,
    mega: int = 50,
    sources: Sequence[str] | np.ndarray | None = None,
) -> list[np.ndarray]:
    """Shuffled batches of indices; with `group`, each batch holds similar lengths.

    Indices are shuffled, cut into mega-batches of `mega * batch_size`, each sorted by length and cut
    into batches, then the batch order is shuffled: batches stay random across epochs but pad little.

    With `sources` (one name per pair, e.g. its dataset), every batch holds pairs of one source only,
    and the sources' batches are interleaved at random. In-batch objectives (CoSENT ranks every pair of
    the batch against every other) then never compare a 0/1 paraphrase label of one dataset with a
    graded score of another, whose scales mean different things. Any codes that sort like the names
    (`PairTokens.dataset_codes`) give the same batches as the names.
    """
    names = np.asarray(sources) if sources is not None else None
    distinct = np.unique(names) if names is not None else []
    if names is not None and len(distinct) > 1:
        batches = []
        for k, name in enumerate(distinct):
            members = np.flatnonzero(names == name)
            sub = length_grouped_batches(lengths[members], batch_size, seed + 7919 * (k + 1), group, mega)
            batches.extend(members[b] for b in sub)
        order = np.random.default_rng(seed).permutation(len(batches))
        return [batches[i] for i in order]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(lengths))
    if not group:
        return [perm[i : i + batch_size] for i in range(0, len(perm), batch_size)]
    batches: list[np.ndarray] = []
    chunk = mega * batch_size
    for start in range(0, len(perm), chunk):
        block = perm[start : start + chunk]
        block = block[np.argsort(-lengths[block], kind="stable")]
        batches.extend(block[i : i + batch_size] for i in range(0, len(block), batch_size))
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def collate(
    pairs: PairTokens, idx: np.ndarray, pad_id: int, reverse: bool = False
) -> dict[str, torch.Tensor]:
    """Padded tensors for the pairs at `idx` (cross: joint input; bi: `a_*` and `b_*` inputs)."""
    batch: dict[str, torch.Tensor] = {}
    if pairs.form == "cross":
        suffix = "_ba" if reverse else ""
        padded = pairs.padded(f"input_ids{suffix}", idx, pad_id, f"token_type_ids{suffix}")
        batch.update({k: torch.from_numpy(v) for k, v in padded.items()})
    else:
        for side in ("a", "b"):
            padded = pairs.padded(f"ids_{side}", idx, pad_id)
            batch.update({f"{side}_{k}": torch.from_numpy(v) for k, v in padded.items()})
    batch["targets"] = torch.from_numpy(pairs.targets[idx].astype(np.float32))
    return batch


def iterate_sorted(pairs: PairTokens, batch_size: int) -> Iterator[np.ndarray]:
    """Index batches sorted by length (inference: least padding); callers restore the order."""
    order = np.argsort(-pairs.lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def config_splits(config: TrainConfig) -> list[SplitRef]:
    """Every split a run reads: train, dev (if an existing split), and the evaluation splits."""
    refs = list(config.train)
    if config.dev.split is not None:
        refs.append(SplitRef(dataset=config.dev.dataset or config.train[0].dataset, split=config.dev.split))
    refs.extend(config.evaluate_on)
    seen: dict[str, SplitRef] = {}
    for ref in refs:
        seen.setdefault(ref.label(), ref)
    return list(seen.values())
