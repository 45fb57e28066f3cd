"""Ingest of the real MSRP and STS-B files in ../shared/data: nothing lost, everything counted.

One ingest per module (about 2 s) is shared by the assertions; each test checks one promise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from simpair.catalog import Catalog
from simpair.contracts import load_contract
from simpair.ingest import IngestReport, run_ingest
from simpair.ingest.versioning import dataset_version, file_sha256
from simpair.schema import PAIR_SCHEMA, QUARANTINE_SCHEMA

REPO = Path(__file__).resolve().parents[1]
CONTRACTS = REPO / "data_contracts"

# From each PROVENANCE.md: data records per file.
RAW_ROWS = {
    ("msrp", "train"): 4076,
    ("msrp", "test"): 1725,
    ("stsb", "train"): 5749,
    ("stsb", "dev"): 1500,
    ("stsb", "test"): 1379,
}


@pytest.fixture(scope="module")
def ingested(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IngestReport]:
    home = tmp_path_factory.mktemp("real-home")
    return home, run_ingest(shared_data, home, CONTRACTS)


def _split(report: IngestReport, dataset: str, split: str):  # noqa: ANN202 - SplitReport
    ds = next(d for d in report.datasets if d.dataset == dataset)
    return next(s for s in ds.splits if s.split == split)


def test_every_raw_record_is_clean_or_quarantined(ingested: tuple[Path, IngestReport]) -> None:
    home, report = ingested
    assert report.ok and [d.status for d in report.datasets] == ["ingested", "ingested"]
    catalog = Catalog(home)
    quarantine = {d: catalog.quarantine(d) for d in ("msrp", "stsb")}
    for (dataset, split), expected in RAW_ROWS.items():
        clean = catalog.read_split(dataset, split)
        rejected = quarantine[dataset].filter(pl.col("split") == split)
        assert clean.height + rejected.height == expected, (dataset, split)
        assert _split(report, dataset, split).data_records == expected
        # every raw line number appears exactly once across clean and quarantine
        lines = sorted(clean["source_line"].to_list() + rejected["source_line"].to_list())
        first = 2 if dataset == "msrp" else 1  # MSRP line 1 is the header
        assert lines == list(range(first, first + expected)), (dataset, split)


def test_msrp_loses_nothing_and_keeps_quotes(ingested: tuple[Path, IngestReport]) -> None:
    home, _ = ingested
    train = Catalog(home).read_split("msrp", "train")
    assert train.height == 4076
    assert train["label"].value_counts().sort("label").rows() == [(0, 1323), (1, 2753)]
    assert train["score"].null_count() == 4076
    # quotes are text: pandas' default quoting would have stripped or merged these
    assert train.filter(pl.col("text_a").str.contains('"') | pl.col("text_b").str.contains('"')).height > 500
    assert not train["text_a"].str.contains("\n").any()
    test = Catalog(home).read_split("msrp", "test")
    assert test.height == 1725 and test["label"].sum() == 1147


def test_stsb_scores_are_normalised_and_original_kept(ingested: tuple[Path, IngestReport]) -> None:
    home, report = ingested
    train = Catalog(home).read_split("stsb", "train")
    assert train["label"].null_count() == train.height
    assert train["score"].min() == 0.0 and train["score"].max() == 1.0
    assert ((train["score"] - train["score_raw"] / 5).abs() < 1e-6).all()
    # 43 exact repeats and 14 with the texts swapped (one pair, symmetric task): 13 of those pairs have
    # a copy with another score, so all 31 of their copies are "conflicting_duplicate"; the 39 other
    # repeats are "duplicate", first copy kept
    assert _split(report, "stsb", "train").reasons == {"duplicate": 39, "conflicting_duplicate": 31}
    assert _split(report, "stsb", "train").label_conflicts == 13
    assert _split(report, "stsb", "dev").reasons == {"duplicate": 3}
    assert _split(report, "stsb", "test").reasons == {"conflicting_duplicate": 2, "duplicate": 1}
    assert train.filter(pl.col("pair_id") == "MSRpar-2012test-0698").height == 1


def test_quirks_are_fixed_and_counted(ingested: tuple[Path, IngestReport]) -> None:
    home, report = ingested
    assert _split(report, "msrp", "train").stats["bom"] == 1
    assert _split(report, "msrp", "train").stats["crlf_lines"] == 4077  # header included
    assert _split(report, "msrp", "train").stats["control_chars_removed"] == 1
    assert _split(report, "stsb", "train").stats["control_chars_removed"] == 1
    assert _split(report, "stsb", "train").stats["mojibake_fixes"] == 40
    assert _split(report, "stsb", "train").stats["bom"] == 0
    catalog = Catalog(home)
    for dataset in ("msrp", "stsb"):
        for split in catalog.splits(dataset):
            frame = catalog.read_split(dataset, split)
            for col in ("text_a", "text_b"):
                texts = frame[col]
                assert not texts.str.contains("‚Ä").any(), (dataset, split)
                assert not texts.str.contains(r"[\x00-\x1f\x7f]").any(), (dataset, split)
                assert not texts.str.contains(r"^\s|\s$|\s\s").any(), (dataset, split)
                assert (texts.str.len_chars() > 0).all()
    fixed = catalog.read_split("stsb", "train").filter(pl.col("pair_id") == "headlines-2015-0089")
    assert (
        fixed["text_b"][0]
        == "Zimbabwe\u2019s opposition MDC party challenges Robert Mugabe\u2019s election win"
    )


def test_leakage_finds_msrp_test_pairs_in_stsb_train(ingested: tuple[Path, IngestReport]) -> None:
    home, report = ingested
    leakage = Catalog(home).leakage()
    assert leakage.columns == [
        "dataset",
        "split",
        "pair_id",
        "pair_key",
        "train_dataset",
        "train_split",
        "train_pair_id",
    ]
    msrp_test = leakage.filter(
        (pl.col("dataset") == "msrp")
        & (pl.col("split") == "test")
        & (pl.col("train_dataset") == "stsb")
        & (pl.col("train_split") == "train")
    )
    assert msrp_test["pair_id"].n_unique() == 498
    counts = {(c.dataset, c.split, c.train_dataset, c.train_split): c.pairs for c in report.leakage.counts}
    assert counts[("stsb", "test", "msrp", "train")] == 127
    assert counts[("stsb", "dev", "msrp", "train")] == 121
    assert ("msrp", "test", "msrp", "train") not in counts  # PROVENANCE: no MSRP train/test overlap
    # dev splits count as training data too (a refit on train + dev must not see test pairs)
    assert counts[("stsb", "test", "stsb", "dev")] == 3
    assert counts[("msrp", "test", "stsb", "dev")] == 129
    assert not leakage.filter(
        (pl.col("dataset") == pl.col("train_dataset")) & (pl.col("split") == pl.col("train_split"))
    ).height, "a split is never reported as its own training data"
    # no training split is ever reported as the evaluation side
    assert set(leakage["split"].unique()) <= {"dev", "test"}


def test_parquet_carries_schema_and_lineage(ingested: tuple[Path, IngestReport], shared_data: Path) -> None:
    home, _ = ingested
    catalog = Catalog(home)
    path = catalog.split_path("msrp", "train")
    parquet = pq.ParquetFile(path)
    assert parquet.schema_arrow.remove_metadata().equals(PAIR_SCHEMA)
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    meta = {k.decode(): v.decode() for k, v in parquet.schema_arrow.metadata.items()}
    sources = json.loads(meta["simpair.source_sha256"])
    assert sources["msrp/msr_paraphrase_train.txt"] == file_sha256(
        shared_data / "msrp/msr_paraphrase_train.txt"
    )
    assert meta["simpair.contract_version"] == "1.0.0"
    contract = load_contract(CONTRACTS / "msrp.yaml")
    assert (
        meta["simpair.dataset_version"]
        == dataset_version(contract, sources)
        == catalog.current_version("msrp")
    )
    q = pq.read_schema(catalog.version_dir("stsb") / "quarantine.parquet")
    assert q.remove_metadata().equals(QUARANTINE_SCHEMA)
    assert catalog.splits("stsb") == {"train": "train", "dev": "dev", "test": "test"}
    assert catalog.datasets() == ["msrp", "stsb"]


def test_second_run_does_nothing(ingested: tuple[Path, IngestReport], shared_data: Path) -> None:
    home, first = ingested
    catalog = Catalog(home)
    files = sorted(p for p in (home / "datasets").rglob("*") if p.is_file() and p.name != ".lock")
    before = {p: os.stat(p).st_mtime_ns for p in files}
    leak_before = os.stat(home / "leakage" / "leakage.parquet").st_mtime_ns
    again = run_ingest(shared_data, home, CONTRACTS)
    assert [d.status for d in again.datasets] == ["unchanged", "unchanged"]
    assert again.leakage is not None and again.leakage.status == "unchanged"
    assert not again.changed and "nothing changed" in again.headline()
    assert {p: os.stat(p).st_mtime_ns for p in files} == before
    assert os.stat(home / "leakage" / "leakage.parquet").st_mtime_ns == leak_before
    assert [s.clean for d in again.datasets for s in d.splits] == [
        s.clean for d in first.datasets for s in d.splits
    ]
    assert catalog.versions("msrp") == [catalog.current_version("msrp")]
