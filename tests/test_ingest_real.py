"""Ingest of the real MSRP and STS-B files in ../shared/data: nothing lost, everything counted.

One ingest per module (about 2 s) is shared by the assertions; each test checks one promise. The
numbers they expect come from an oracle in this file, not from simpair's reader: the raw files read
as plain lines split on tabs (both contracts say `quoting: none`), with the columns written out
here. Its pair identity is the texts NFC-normalised, stripped of control characters and with their
whitespace collapsed, compared either way round; it leaves mojibake alone, which changes no count
in these files.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
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

# Where each file's records, label and texts sit (from each PROVENANCE.md), restated for the oracle.
FILES = {
    ("msrp", "train"): "msrp/msr_paraphrase_train.txt",
    ("msrp", "test"): "msrp/msr_paraphrase_test.txt",
    ("stsb", "train"): "stsb/sts-train.csv",
    ("stsb", "dev"): "stsb/sts-dev.csv",
    ("stsb", "test"): "stsb/sts-test.csv",
}
HEADER = {"msrp": True, "stsb": False}  # MSRP line 1 is "Quality  #1 ID  #2 ID  #1 String  #2 String"
LABEL = {"msrp": 0, "stsb": 4}
TEXTS = {"msrp": (3, 4), "stsb": (5, 6)}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff]")  # Unicode Cc but whitespace, BOM


def _tidy(text: str) -> str:
    return " ".join(_CONTROL.sub("", unicodedata.normalize("NFC", text)).split())


@dataclass
class RawFile:
    """One raw file read as plain lines: the oracle for what ingest must report about it."""

    bom: bool
    crlf_lines: int  # lines ending in CR LF, header included
    first_line: int  # the physical line of the first data record
    records: list[list[str]]  # every data record's fields
    label: int
    texts: tuple[int, int]

    def text_fields(self) -> Iterator[str]:
        return (r[i] for r in self.records for i in self.texts)

    def copies(self) -> dict[frozenset[str], list[str]]:
        """Pair (either order) -> the labels of its copies, in file order."""
        found: dict[frozenset[str], list[str]] = defaultdict(list)
        for r in self.records:
            found[frozenset(_tidy(r[i]) for i in self.texts)].append(r[self.label])
        return found

    def reasons(self) -> dict[str, int]:
        """The quarantine reasons the duplicate rules must give: a repeat with the first copy's label is
        a "duplicate" (the first copy kept); every copy of a pair whose labels differ is conflicting."""
        out: Counter[str] = Counter()
        for labels in self.copies().values():
            if len({float(label) for label in labels}) > 1:
                out["conflicting_duplicate"] += len(labels)
            elif len(labels) > 1:
                out["duplicate"] += len(labels) - 1
        return dict(out)

    def conflicts(self) -> int:
        return sum(len({float(x) for x in labels}) > 1 for labels in self.copies().values())

    def kept(self) -> dict[frozenset[str], str]:
        """The pairs that stay clean, with their label: every pair whose copies agree."""
        return {
            pair: labels[0] for pair, labels in self.copies().items() if len({float(x) for x in labels}) == 1
        }


def _read_raw(path: Path, dataset: str) -> RawFile:
    data = path.read_bytes()
    body = data.removeprefix(b"\xef\xbb\xbf")
    lines = body.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the final newline ends the last line; it starts none
    records = [line.removesuffix(b"\r").decode("utf-8").split("\t") for line in lines]
    skip = 1 if HEADER[dataset] else 0
    return RawFile(
        bom=len(body) < len(data),
        crlf_lines=sum(line.endswith(b"\r") for line in lines),
        first_line=1 + skip,
        records=records[skip:],
        label=LABEL[dataset],
        texts=TEXTS[dataset],
    )


@pytest.fixture(scope="module")
def raw(shared_data: Path) -> dict[tuple[str, str], RawFile]:
    return {
        (dataset, split): _read_raw(shared_data / name, dataset) for (dataset, split), name in FILES.items()
    }


@pytest.fixture(scope="module")
def ingested(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IngestReport]:
    home = tmp_path_factory.mktemp("real-home")
    return home, run_ingest(shared_data, home, CONTRACTS)


def _split(report: IngestReport, dataset: str, split: str):  # noqa: ANN202 - SplitReport
    ds = next(d for d in report.datasets if d.dataset == dataset)
    return next(s for s in ds.splits if s.split == split)


def test_every_raw_record_is_clean_or_quarantined(
    ingested: tuple[Path, IngestReport], raw: dict[tuple[str, str], RawFile]
) -> None:
    home, report = ingested
    assert report.ok and [d.status for d in report.datasets] == ["ingested", "ingested"]
    catalog = Catalog(home)
    quarantine = {d: catalog.quarantine(d) for d in ("msrp", "stsb")}
    for (dataset, split), oracle in raw.items():
        expected = len(oracle.records)
        clean = catalog.read_split(dataset, split)
        rejected = quarantine[dataset].filter(pl.col("split") == split)
        assert clean.height + rejected.height == expected, (dataset, split)
        assert _split(report, dataset, split).data_records == expected
        assert clean.height == len(oracle.kept()), (dataset, split)
        # every raw line number appears exactly once across clean and quarantine
        lines = sorted(clean["source_line"].to_list() + rejected["source_line"].to_list())
        first = oracle.first_line
        assert lines == list(range(first, first + expected)), (dataset, split)


def test_msrp_loses_nothing_and_keeps_quotes(
    ingested: tuple[Path, IngestReport], raw: dict[tuple[str, str], RawFile]
) -> None:
    home, _ = ingested
    for split in ("train", "test"):
        clean = Catalog(home).read_split("msrp", split)
        oracle = raw[("msrp", split)]
        assert clean.height == len(oracle.records)  # no MSRP pair repeats: nothing quarantined
        labels = Counter(int(label) for label in oracle.kept().values())
        assert dict(clean["label"].value_counts().rows()) == labels
        assert clean["score"].null_count() == clean.height
    train = Catalog(home).read_split("msrp", "train")
    # quotes are text: pandas' default quoting would have stripped or merged these
    quoted = sum(any('"' in text for text in (r[3], r[4])) for r in raw[("msrp", "train")].records)
    assert quoted > 500
    assert (
        train.filter(pl.col("text_a").str.contains('"') | pl.col("text_b").str.contains('"')).height == quoted
    )
    assert not train["text_a"].str.contains("\n").any()


def test_stsb_scores_are_normalised_and_original_kept(
    ingested: tuple[Path, IngestReport], raw: dict[tuple[str, str], RawFile]
) -> None:
    home, report = ingested
    train = Catalog(home).read_split("stsb", "train")
    assert train["label"].null_count() == train.height
    assert train["score"].min() == 0.0 and train["score"].max() == 1.0
    assert ((train["score"] - train["score_raw"] / 5).abs() < 1e-6).all()
    # Repeats, some with the texts swapped (one pair, symmetric task): a pair with a copy of another
    # score has all its copies "conflicting_duplicate"; other repeats are "duplicate", first copy kept.
    # In train the oracle finds 39 duplicates and 31 conflicting copies of 13 pairs.
    for split in ("train", "dev", "test"):
        oracle = raw[("stsb", split)]
        assert _split(report, "stsb", split).reasons == oracle.reasons(), split
        assert _split(report, "stsb", split).label_conflicts == oracle.conflicts(), split
    assert (
        raw[("stsb", "train")].conflicts() > 0 and raw[("stsb", "dev")].reasons()
    )  # the rules are exercised
    kept = raw[("stsb", "train")].kept()
    assert sorted(train["score_raw"].to_list()) == sorted(float(score) for score in kept.values())
    assert train.filter(pl.col("pair_id") == "MSRpar-2012test-0698").height == 1


def test_quirks_are_fixed_and_counted(
    ingested: tuple[Path, IngestReport], raw: dict[tuple[str, str], RawFile]
) -> None:
    home, report = ingested
    for (dataset, split), oracle in raw.items():
        stats = _split(report, dataset, split).stats
        where = (dataset, split)
        assert stats.get("bom", 0) == int(oracle.bom), where
        assert stats.get("crlf_lines", 0) == oracle.crlf_lines, where
        control = sum(len(_CONTROL.findall(text)) for text in oracle.text_fields())
        assert stats.get("control_chars_removed", 0) == control, where
        # every mojibake sequence in these files starts with "‚Ä" (UTF-8 read as Mac Roman)
        assert stats.get("mojibake_fixes", 0) == sum(t.count("‚Ä") for t in oracle.text_fields()), where
    # the quirks are there to be found: MSRP has a BOM and CR LF lines, STS-B train mojibake
    assert raw[("msrp", "train")].bom and raw[("msrp", "train")].crlf_lines
    assert any("‚Ä" in text for text in raw[("stsb", "train")].text_fields())
    assert any(_CONTROL.search(text) for text in raw[("stsb", "train")].text_fields())
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


def test_leakage_finds_msrp_test_pairs_in_stsb_train(
    ingested: tuple[Path, IngestReport], raw: dict[tuple[str, str], RawFile]
) -> None:
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

    def shared(evaluated: tuple[str, str], trained: tuple[str, str]) -> int:
        """Clean pairs of an evaluation split that are also clean pairs of a training split."""
        return len(raw[evaluated].kept().keys() & raw[trained].kept().keys())

    msrp_test = leakage.filter(
        (pl.col("dataset") == "msrp")
        & (pl.col("split") == "test")
        & (pl.col("train_dataset") == "stsb")
        & (pl.col("train_split") == "train")
    )
    assert msrp_test["pair_id"].n_unique() == shared(("msrp", "test"), ("stsb", "train")) > 0
    counts = {(c.dataset, c.split, c.train_dataset, c.train_split): c.pairs for c in report.leakage.counts}
    for evaluated, trained in [
        (("stsb", "test"), ("msrp", "train")),
        (("stsb", "dev"), ("msrp", "train")),
        (("stsb", "test"), ("stsb", "dev")),  # dev splits count as training data too (a refit on train +
        (("msrp", "test"), ("stsb", "dev")),  # dev must not see test pairs)
    ]:
        assert counts[(*evaluated, *trained)] == shared(evaluated, trained) > 0, (evaluated, trained)
    assert shared(("msrp", "test"), ("msrp", "train")) == 0  # PROVENANCE: no MSRP train/test overlap
    assert ("msrp", "test", "msrp", "train") not in counts
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
