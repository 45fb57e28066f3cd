"""Training data read from memory-mapped token columns: exact ids, index views, epochs, DDP shards."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_training_toydata import write_toy_home

from simpair.pair_tokens import PairTokens, open_pairs, open_token_file, tokens_to_pairs
from simpair.training import TrainConfig, train
from simpair.training.ddp import DistInfo, shard_rows
from simpair.training.sampling import epoch_batches, epoch_rows


def bi_table(n: int, seed: int, id_type: pa.DataType, prefix: str = "p") -> pa.Table:
    rng = np.random.default_rng(seed)

    def ids() -> list[list[int]]:
        return [rng.integers(0, 30000, size=rng.integers(0, 12)).tolist() for _ in range(n)]

    a, b = ids(), ids()
    return pa.table(
        {
            "pair_id": pa.array([f"{prefix}-{i:05d}-é" for i in range(n)]),
            "label": pa.array(rng.integers(0, 2, size=n), type=pa.int8()),
            "score": pa.array([None] * n, type=pa.float32()),
            "ids_a": pa.array(a, type=pa.list_(id_type)),
            "ids_b": pa.array(b, type=pa.list_(id_type)),
            "length_a": pa.array([len(x) for x in a], type=pa.int32()),
            "length_b": pa.array([len(x) for x in b], type=pa.int32()),
            "truncated": pa.array([False] * n),
        }
    )


def cross_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ab = [rng.integers(0, 30000, size=rng.integers(3, 15)).tolist() for _ in range(n)]
    ba = [x[::-1] for x in ab]
    types = [[0] * (len(x) // 2) + [1] * (len(x) - len(x) // 2) for x in ab]
    return pa.table(
        {
            "pair_id": pa.array([f"c{i}" for i in range(n)]),
            "label": pa.array([None] * n, type=pa.int8()),
            "score": pa.array(rng.random(n), type=pa.float32()),
            "input_ids": pa.array(ab, type=pa.list_(pa.uint16())),
            "token_type_ids": pa.array(types, type=pa.list_(pa.int8())),
            "length": pa.array([len(x) for x in ab], type=pa.int32()),
            "input_ids_ba": pa.array(ba, type=pa.list_(pa.uint16())),
            "token_type_ids_ba": pa.array([t[::-1] for t in types], type=pa.list_(pa.int8())),
            "length_ba": pa.array([len(x) for x in ab], type=pa.int32()),
            "truncated": pa.array([False] * n),
        }
    )


def rows_of(pairs: PairTokens, name: str, idx: np.ndarray) -> list[list[int]]:
    batch = pairs.padded(name, idx, pad_id=-7)
    return [
        r[: int(m.sum())].tolist() for r, m in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]


@pytest.mark.parametrize("id_type", [pa.uint16(), pa.int32()], ids=["uint16", "int32"])
def test_mapped_columns_return_the_cache_ids_across_row_groups(tmp_path: Path, id_type: pa.DataType) -> None:
    table = bi_table(1000, 0, id_type)
    path = tmp_path / "d-train.parquet"
    pq.write_table(table, path, row_group_size=137)  # 8 row groups, boundaries inside batches
    assert pq.ParquetFile(path).num_row_groups == 8
    file = open_token_file(path)
    assert file.tokens["ids_a"].values.dtype == np.dtype(id_type.to_pandas_dtype())
    assert isinstance(file.tokens["ids_a"].values.base, np.memmap)  # mapped, not read into memory
    pairs = open_pairs(path, "paraphrase", "d", "train")
    idx = np.random.default_rng(1).integers(0, 1000, size=300)
    for name in ("ids_a", "ids_b"):
        expected = table.column(name).to_pylist()
        assert rows_of(pairs, name, idx) == [expected[i] for i in idx]
        batch = pairs.padded(name, idx[:5], pad_id=-7)
        assert (
            batch["input_ids"].dtype == np.int64
            and (batch["input_ids"][batch["attention_mask"] == 0] == -7).all()
        )
    assert pairs.pair_ids == table.column("pair_id").to_pylist()
    pairs.files[0].release()  # pages let go are read again from the file
    assert rows_of(pairs, "ids_a", idx[:50]) == [table.column("ids_a").to_pylist()[i] for i in idx[:50]]
    assert pairs.labels.tolist() == table.column("label").to_pylist()
    lengths = np.maximum(table.column("length_a").to_numpy(), table.column("length_b").to_numpy())
    assert pairs.lengths.tolist() == lengths.tolist()
    # the in-memory form reads the same
    same = tokens_to_pairs(pl.from_arrow(table), "bi", "paraphrase", "d", "train")
    assert rows_of(same, "ids_b", idx) == rows_of(pairs, "ids_b", idx)
    # a rewritten cache file is never read through its old columns
    pq.write_table(table.slice(0, 10), path)
    assert len(open_token_file(path)) == 10


def test_views_subset_concat_and_swap_without_copying_ids(tmp_path: Path) -> None:
    pq.write_table(cross_table(50, 2), tmp_path / "x-train.parquet", row_group_size=16)
    pq.write_table(cross_table(30, 3), tmp_path / "y-train.parquet")
    x = open_pairs(tmp_path / "x-train.parquet", "sts", "x", "train")
    y = open_pairs(tmp_path / "y-train.parquet", "sts", "y", "train")
    both = PairTokens.concat([x.subset([4, 2]), y.subset([7]), x.subset([9]).swapped()])
    assert both.pair_ids == ["c4", "c2", "c7", "c9"]
    assert both.files[0] is x.files[0] and len(both.files) == 2  # shared, not copied
    ab = cross_table(50, 2).column("input_ids").to_pylist()
    ab_y = cross_table(30, 3).column("input_ids").to_pylist()
    assert rows_of(both, "input_ids", np.arange(4)) == [ab[4], ab[2], ab_y[7], ab[9][::-1]]
    assert rows_of(both.swapped(), "input_ids", np.array([3])) == [ab[9]]
    types = both.padded("input_ids", np.array([3]), 0, "token_type_ids")["token_type_ids"][0]
    assert types[: len(ab[9])].tolist() == cross_table(50, 2).column("token_type_ids_ba").to_pylist()[9]
    assert both.dataset == ["x", "x", "y", "x"] and both.dataset_codes().tolist() == [0, 0, 1, 0]
    assert both.count_by_dataset() == {"x": 3, "y": 1} and both.split_labels() == ["x/train", "y/train"]
    assert both.pair_lines().to_pylist()[2] == "y\ttrain\tc7"
    assert both.targets.dtype == np.float32 and both.labels.tolist() == [-1] * 4
    assert (
        both.digest() == hashlib.sha1(("\n".join(both.pair_lines().to_pylist()) + "\n").encode()).hexdigest()
    )


def test_samples_per_epoch_walks_every_row_before_repeating_one() -> None:
    n, samples = 103, 25
    epochs = [epoch_rows(n, samples, e, seed=5) for e in range(1, 6)]
    assert all(len(e) == samples for e in epochs)
    first_pass = np.concatenate(epochs)[:n]
    assert sorted(first_pass.tolist()) == list(range(n))  # every row once across epochs 1-5
    assert epoch_rows(n, samples, 2, seed=5).tolist() == epochs[1].tolist()  # seeded
    assert epoch_rows(n, None, 1, 5) is None and epoch_rows(n, n, 3, 5) is None
    lengths = np.random.default_rng(0).integers(1, 50, size=n)
    batches = epoch_batches(lengths, 8, 1, True, None, epochs[0])
    assert sorted(np.concatenate(batches).tolist()) == sorted(epochs[0].tolist())


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_shards_are_disjoint_seeded_and_cover_every_row(world: int) -> None:
    shards = [shard_rows(1001, 42, DistInfo(rank, world)) for rank in range(world)]
    assert sorted(np.concatenate(shards).tolist()) == list(range(1001))
    assert max(len(s) for s in shards) - min(len(s) for s in shards) <= 1
    assert shards[0].tolist() == shard_rows(1001, 42, DistInfo(0, world)).tolist()
    assert shard_rows(5, 42, DistInfo()).tolist() == list(range(5))  # one process: every row, in order


@pytest.mark.usefixtures("one_thread")
def test_samples_per_epoch_bounds_each_epoch_of_a_training(home: Path) -> None:
    write_toy_home(home)
    cfg = TrainConfig.model_validate(
        {
            "name": "toy",
            "task": "sts",
            "kind": "bi",
            "objective": "cosent",
            "backbone": "tiny",
            "train": [{"dataset": "stsb", "split": "train"}],
            "dev": {"split": "dev"},
            "max_length": 48,
            "epochs": 3,
            "batch_size": 8,
            "samples_per_epoch": 20,
            "early_stopping_patience": None,
            "progress": False,
            "num_threads": 1,
        }
    )
    result = train(cfg, home)
    assert [h["step"] for h in result.history] == [3, 6, 9]  # 20 rows a epoch: batches of 8, 8, 4
    assert result.metrics["samples_per_epoch"] == 20 and result.metrics["train_pairs"] == 50
