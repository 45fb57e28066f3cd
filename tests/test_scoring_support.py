"""Shared helpers for the scoring tests (no tests here): batches, a tiny model, exactly-once checks."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "river",
    "bank",
    "money",
    "loan",
    "market",
    "stock",
    "rose",
    "fell",
    "president",
    "said",
    "today",
    "company",
    "shares",
    "percent",
    "year",
    "city",
    "police",
    "report",
    "new",
    "old",
    "house",
    "car",
]


def make_pairs(n: int, seed: int = 0, prefix: str = "p") -> pa.Table:
    """n pairs with ids, texts of 3-20 words (some repeated pairs) and two passthrough columns."""
    rng = random.Random(seed)
    a, b = [], []
    for i in range(n):
        if i and rng.random() < 0.1:  # batches repeat pairs: exercise the dedup path
            j = rng.randrange(i)
            a.append(a[j])
            b.append(b[j])
            continue
        a.append(" ".join(rng.choices(WORDS, k=rng.randint(3, 20))))
        b.append(" ".join(rng.choices(WORDS, k=rng.randint(3, 20))))
    return pa.table(
        {
            "pair_id": pa.array([f"{prefix}{i:07d}" for i in range(n)], pa.string()),
            "text_a": pa.array(a, pa.string()),
            "text_b": pa.array(b, pa.string()),
            "source": pa.array([f"src-{i % 3}" for i in range(n)], pa.string()),
            "weight": pa.array([i * 0.5 for i in range(n)], pa.float64()),
        }
    )


def write_batch(table: pa.Table, path: Path, row_group_size: int = 700) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def corrupt_row_group(path: Path, group: int) -> None:
    """Overwrite the middle of one column chunk's pages: the footer stays valid, the data does not."""
    meta = pq.ParquetFile(path).metadata.row_group(group).column(1)
    data = bytearray(path.read_bytes())
    start = meta.data_page_offset + 30
    data[start : meta.data_page_offset + meta.total_compressed_size - 10] = b"\xab" * (
        meta.total_compressed_size - 40
    )
    path.write_bytes(bytes(data))


def read_outputs(out: Path) -> pa.Table:
    """All scored outputs under `out`, in file-name order (one file per input batch)."""
    files = sorted(out.glob("date=*/*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else pa.table({})


def read_rejects(out: Path) -> pa.Table | None:
    files = sorted(out.glob("_rejects/date=*/*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else None


def assert_exactly_once(inputs: pa.Table, output: pa.Table, rejected_ids: set[str] = frozenset()) -> None:
    """Output = input rows minus rejects, same order, each row once, passthrough values intact."""
    expected = [pid for pid in inputs.column("pair_id").to_pylist() if pid not in rejected_ids]
    got = output.column("pair_id").to_pylist()
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicated rows in the output"
    missing = set(expected) - set(got)
    assert not missing, f"{len(missing)} rows missing, e.g. {sorted(missing)[:3]}"
    assert got == expected, "row order differs from the input"
    by_id = {pid: i for i, pid in enumerate(inputs.column("pair_id").to_pylist())}
    rows = [by_id[pid] for pid in got]
    for column in ("text_a", "text_b", "source", "weight"):
        if column in inputs.column_names:
            assert output.column(column).to_pylist() == inputs.column(column).take(rows).to_pylist(), column


@pytest.fixture(scope="session")
def tiny_cross(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from simpair.models import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("models") / "tiny-cross", task="paraphrase", kind="cross")


@pytest.fixture(scope="session")
def tiny_bi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from simpair.models import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("models") / "tiny-bi", task="sts", kind="bi", seed=1)


def write_tiny_stack(root: Path) -> Path:
    """A `kind: stacked` directory written by hand (fitting one needs a training home): a tiny
    paraphrase cross-encoder and bi-encoder combined by a fixed logistic model."""
    from simpair.models import save_tiny_model
    from simpair.models.composite import StackSpec
    from simpair.models.metadata import ModelMetadata

    members = ["members/0-cross", "members/1-bi"]
    save_tiny_model(root / members[0], task="paraphrase", kind="cross", seed=3)
    save_tiny_model(root / members[1], task="paraphrase", kind="bi", seed=4)
    StackSpec(
        combiner="logistic", members=members, features=["member:0", "member:1"], mean=[0.0, 0.0],
        scale=[1.0, 1.0], coef=[1.5, 2.0], intercept=-1.0, regularisation=1.0,
    ).write(root)  # fmt: skip
    meta = ModelMetadata(
        kind="stacked", task="paraphrase", objective="stack", backbone="stack", threshold=0.5
    )
    meta.write(root)
    return root


RUN_COLUMNS = ["run_id", "scored_at"]


def outputs_by_name(out: Path) -> dict[str, pa.Table]:
    """Every scored output under `out`, keyed by its path relative to `out`."""
    return {p.relative_to(out).as_posix(): pq.read_table(p) for p in sorted(out.glob("date=*/*.parquet"))}


def assert_same_outputs(first: dict[str, pa.Table], second: dict[str, pa.Table], atol: float = 1e-6) -> None:
    """Two runs wrote the same files with the same rows; scores equal to `atol` (float sums may differ
    in the last bit between thread counts); run id and time may differ."""
    assert list(first) == list(second) and first
    for name in first:
        left, right = first[name].drop_columns(RUN_COLUMNS), second[name].drop_columns(RUN_COLUMNS)
        scores = ["score", "probability"]
        assert left.drop_columns(scores).equals(right.drop_columns(scores))
        for column in scores:
            np.testing.assert_allclose(
                left.column(column).to_numpy(), right.column(column).to_numpy(), atol=atol
            )
