"""Ingest work that overlaps on two cores: chunks read ahead, and leakage hashes taken while the rows are
written; outputs as when everything ran one step at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
import yaml
from ingest_helpers import TOY_CONTRACT
from test_ingest_dedupe import _home, _old_leakage

from simpair.catalog import LEAKAGE_COLUMNS, Catalog
from simpair.contracts import Contract
from simpair.ingest import leakage
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.parse import _read_ahead


@pytest.fixture(autouse=True)
def _forget_hashes() -> Iterator[None]:
    """Hashes remembered here name files of this test's folder only."""
    yield
    leakage._cache.clear()


def test_reading_ahead_stops_reading_when_the_reader_leaves() -> None:
    served: list[int] = []

    def items() -> Iterator[int]:
        for i in range(100):
            time.sleep(0.005)
            served.append(i)
            yield i

    reading = _read_ahead(items())
    assert next(reading) == 0
    reading.close()
    count = len(served)
    time.sleep(0.05)
    assert count <= 2 and len(served) == count  # one item read ahead at most, none after close
    assert not [t for t in threading.enumerate() if t.name.startswith("simpair-read")]


def test_reading_ahead_raises_the_source_error() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(_read_ahead(items()))


def test_remembered_hashes_give_the_same_leakage(tmp_path: Path) -> None:
    home = _home(tmp_path, seed=5)
    catalog = Catalog(home)
    for dataset in catalog.datasets():
        for split in catalog.splits(dataset):
            path = catalog.split_path(dataset, split)
            frame = pl.read_parquet(path)
            leakage.remember_hashes(path, [frame.select(leakage.leakage_hash()).to_series()])
            assert leakage._remembered(path) is not None
    got = leakage.compute_leakage(catalog)
    assert got.height > 50
    assert got.sort(LEAKAGE_COLUMNS).equals(_old_leakage(catalog).sort(LEAKAGE_COLUMNS))


def test_hashes_of_a_rewritten_file_are_not_used(tmp_path: Path) -> None:
    home = _home(tmp_path, seed=6)
    catalog = Catalog(home)
    path = catalog.split_path("alpha", "test")
    frame = pl.read_parquet(path)
    leakage.remember_hashes(path, [pl.Series("h", range(frame.height), dtype=pl.UInt64)])  # wrong hashes
    time.sleep(0.01)
    frame.write_parquet(path.with_suffix(".new"))
    path.with_suffix(".new").replace(path)  # same rows, another file
    assert leakage._remembered(path) is None
    got = leakage.compute_leakage(catalog)
    assert got.sort(LEAKAGE_COLUMNS).equals(_old_leakage(catalog).sort(LEAKAGE_COLUMNS))


def test_an_ingest_remembers_the_leakage_hashes_of_its_split_files(tmp_path: Path) -> None:
    sources = tmp_path / "sources"
    (sources / "toy").mkdir(parents=True)
    rows = ["label\ta\tb"] + [f"{i % 2}\tsentence {i}\tother {i % 7}" for i in range(40)]
    (sources / "toy" / "train.tsv").write_text("\n".join(rows[:31]) + "\n")
    (sources / "toy" / "test.tsv").write_text("\n".join([rows[0], *rows[31:], rows[3]]) + "\n")
    contract = Contract.model_validate(yaml.safe_load(TOY_CONTRACT))
    report = ingest_dataset(contract, sources, tmp_path / "home", chunk_bytes=64)
    assert report.status == "ingested"
    catalog = Catalog(tmp_path / "home")
    for split in ("train", "test"):
        path = catalog.split_path("toy", split)
        kept = leakage._remembered(path)
        assert kept is not None
        assert kept.to_list() == pl.read_parquet(path).select(leakage.leakage_hash()).to_series().to_list()
    assert leakage.compute_leakage(catalog).height == 1  # test's copy of train line 3
