"""A new CSV dataset (Quora-Question-Pairs style) ingests through a YAML contract alone, no code change.

The test writes both the data (quoted fields, questions spanning several lines, missing questions,
a repeated pair, a bad label) and the contract, and puts them beside the real sources and contracts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

from simpair.catalog import Catalog
from simpair.ingest import run_ingest

REPO = Path(__file__).resolve().parents[1]

QQP_CONTRACT = """\
dataset: qqp
contract_version: "0.1.0"
description: Quora Question Pairs style CSV
format:
  delimiter: ","
  quoting: csv
  header: true
  encoding: utf-8
  field_counts: [6]
files:
  - {split: train, role: train, pattern: "qqp/train.csv"}
  - {split: dev, role: dev, pattern: "qqp/dev*.csv"}
columns:
  pair_id: id
  text_a: question1
  text_b: question2
  label: is_duplicate
label:
  kind: binary
  values: [0, 1]
"""

# Physical line numbers are in the comments; a record starts where its first line is.
TRAIN = (
    '"id","qid1","qid2","question1","question2","is_duplicate"\n'  # 1 header
    '"0","1","2","What is the step by step guide to invest in share market?","What is the step by step guide '
    'to invest in share market in india?","0"\n'  # 2
    # 3-4: a question spanning two lines
    '"1","3","4","How do I read\nand find my YouTube comments?",'
    '"How can I see all my Youtube comments?","1"\n'
    '"2","5","6","Why is the ""sky"" blue?","Why does the sky look blue?","1"\n'  # 5
    '"3","7","8","","What is love?","0"\n'  # 6: missing question1
    '"4","9","10","Is this\n\n  a three-line question?","Is this a question?","1"\n'  # 7-9
    '"5","11","12","How do I learn Python?",,"0"\n'  # 10: missing question2 (unquoted empty)
    '"6","1","2","What is the step by step guide to invest in share market?","What is the step by step guide '
    'to invest in share market in india?","0"\n'  # 11: exact duplicate of id 0
    '"7","13","14","Can pigs fly?","Do pigs fly?","maybe"\n'  # 12: bad label
    '"8","15","16","Short one","Only five fields"\n'  # 13: wrong field count
    '"9","17","18","Is it a paraphrase?","Is it paraphrased?","2"\n'  # 14: label outside {0, 1}
)
# Dev: one pair already in qqp train (sentences swapped), one verbatim MSRP train pair.
DEV = (
    "id,qid1,qid2,question1,question2,is_duplicate\r\n"
    '100,31,32,"How can I see all my Youtube comments?","How do I read\nand find my YouTube comments?",1\r\n'
    '101,33,34,"Amrozi accused his brother, whom he called ""the witness"", of deliberately distorting his '
    'evidence.","Referring to him as only ""the witness"", Amrozi accused his brother of deliberately '
    'distorting his evidence.",1\r\n'
    "102,35,36,What is a fresh question?,Is this new?,0\r\n"
)


def _setup(tmp_path: Path, shared_data: Path) -> tuple[Path, Path]:
    sources = tmp_path / "sources"
    (sources / "qqp").mkdir(parents=True)
    for name in ("msrp", "stsb"):  # the real sources, linked in place (never copied)
        (sources / name).symlink_to(shared_data / name, target_is_directory=True)
    (sources / "qqp" / "train.csv").write_text(TRAIN, encoding="utf-8")
    (sources / "qqp" / "dev.csv").write_bytes(DEV.encode())
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    for name in ("msrp.yaml", "stsb.yaml"):
        shutil.copy(REPO / "data_contracts" / name, contracts / name)
    (contracts / "qqp.yaml").write_text(QQP_CONTRACT)
    return sources, contracts


def test_qqp_csv_ingests_through_its_contract_alone(tmp_path: Path, home: Path, shared_data: Path) -> None:
    sources, contracts = _setup(tmp_path, shared_data)
    report = run_ingest(sources, home, contracts)
    assert report.ok, report.headline()
    qqp = next(d for d in report.datasets if d.dataset == "qqp")
    train_report = next(s for s in qqp.splits if s.split == "train")
    assert train_report.data_records == 10  # 13 physical data lines, 3 of them continuation lines
    assert train_report.reasons == {
        "empty_text": 2,
        "duplicate": 1,
        "bad_label": 1,
        "field_count": 1,
        "label_domain": 1,
    }

    assert train_report.examples[0].startswith("bad_label: qqp/train.csv:12:")
    assert len(train_report.examples) == 5  # one per reason

    catalog = Catalog(home)
    train = catalog.read_split("qqp", "train")
    assert train["pair_id"].to_list() == ["0", "1", "2", "4"]
    assert train["source_line"].to_list() == [2, 3, 5, 7]
    by_id = {row["pair_id"]: row for row in train.iter_rows(named=True)}
    assert by_id["1"]["text_a"] == "How do I read and find my YouTube comments?"
    assert by_id["2"]["text_a"] == 'Why is the "sky" blue?'
    assert by_id["4"]["text_a"] == "Is this a three-line question?"
    assert train["label"].to_list() == [0, 1, 1, 1]

    quarantine = catalog.quarantine("qqp").filter(pl.col("split") == "train").sort("source_line")
    rows = {r["source_line"]: r for r in quarantine.iter_rows(named=True)}
    assert sorted(rows) == [6, 10, 11, 12, 13, 14]
    assert rows[6]["reason"] == "empty_text" and rows[6]["raw_line"].startswith('"3","7","8",""')
    assert rows[10]["reason"] == "empty_text" and "text_b" in rows[10]["detail"]
    assert rows[11]["reason"] == "duplicate" and "line 2" in rows[11]["detail"]
    assert rows[12]["reason"] == "bad_label" and "maybe" in rows[12]["detail"]
    assert rows[13]["reason"] == "field_count" and "qqp/train.csv:13" in rows[13]["detail"]
    assert rows[14]["reason"] == "label_domain"

    dev = catalog.read_split("qqp", "dev")
    assert dev.height == 3 and dev["source_line"].to_list() == [2, 4, 5]

    leakage = catalog.leakage().filter(pl.col("dataset") == "qqp")
    found = {(r["pair_id"], r["train_dataset"], r["train_pair_id"]) for r in leakage.iter_rows(named=True)}
    assert found == {("100", "qqp", "1"), ("101", "msrp", "702876-702977")}
