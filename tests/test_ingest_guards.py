"""Guards against silently wrong data: each is a contract or data mistake a user really makes.

A wrong mapping must fail loudly and leave the last good dataset version current; nothing here may
ingest with rc 0 and garbage in the Parquet.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from test_ingest_contract_features import AB, TSV3, assert_accounted, binary_contract, ingest

from simpair.catalog import Catalog
from simpair.contracts import ContractError, load_contract
from simpair.ingest.dataset import REJECTED

SIMPAIR = str(Path(sys.executable).with_name("simpair"))
GOOD = b"label\ta\tb\n1\tA cat sits.\tA cat is sitting.\n0\tIt rains.\tThe sun shines.\n1\tHi.\tHello.\n"


def test_text_a_and_text_b_from_the_same_column_is_a_contract_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(binary_contract([{"split": "train", "pattern": "t.tsv"}], {**AB, "text_b": "a"}))
    with pytest.raises(ContractError, match=r"text_a and text_b both map to column 'a'.*columns.text_pair"):
        load_contract(path)


def test_same_column_by_name_and_by_position_fails_the_source(tmp_path: Path) -> None:
    contract = binary_contract([{"split": "train", "pattern": "t.tsv"}], {**AB, "text_b": 1})
    report, catalog = ingest(tmp_path, contract, {"t.tsv": GOOD})
    assert report.status == "failed" and "are the same column 1" in (report.error or "")
    assert catalog.datasets() == []


def test_a_split_with_no_clean_row_fails_and_current_stays(tmp_path: Path) -> None:
    contract = binary_contract([{"split": "train", "pattern": "t.tsv"}], AB)
    first, catalog = ingest(tmp_path, contract, {"t.tsv": GOOD})
    assert first.status == "ingested"
    good_version = catalog.current_version("toy")
    # tomorrow's export carries 3-class strings in the label column: every row is quarantined
    wrong = b"label\ta\tb\nENTAILMENT\tA.\tB.\nNEUTRAL\tC.\tD.\nCONTRADICTION\tE.\tF.\nNEUTRAL\tG.\tH.\n"
    report, catalog = ingest(tmp_path, contract, {"t.tsv": wrong})
    assert report.status == "failed"
    assert "split 'train' has 0 clean rows of 4 read" in (report.error or "")
    assert "quarantined: bad_label 4" in (report.error or "")
    assert f"CURRENT stays at {good_version}" in (report.error or "")
    assert catalog.current_version("toy") == good_version
    assert catalog.read_split("toy", "train").height == 3
    # the rejected attempt is kept for inspection, with every row accounted for
    kept = tmp_path / "home" / "datasets" / "toy" / REJECTED / str(report.version)
    quarantine = pl.read_parquet(kept / "quarantine.parquet")
    assert quarantine.height == 4 and set(quarantine["reason"]) == {"bad_label"}
    assert pl.read_parquet(kept / "train.parquet").height == 0
    assert catalog.versions("toy") == [good_version]  # a rejected version is never listed as a version


def test_the_cli_exits_1_when_a_guard_rejects_a_version(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "t.tsv").write_bytes(b"label\ta\tb\nyes\tA.\tB.\n")
    (tmp_path / "contracts").mkdir()
    contract = binary_contract([{"split": "train", "pattern": "t.tsv"}], AB)
    (tmp_path / "contracts" / "toy.yaml").write_text(contract)
    cmd = [SIMPAIR, "ingest", "--no-prefect", "--sources", str(tmp_path / "src"),
           "--home", str(tmp_path / "h"), "--contracts", str(tmp_path / "contracts")]  # fmt: skip
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"}
    )
    assert done.returncode == 1
    assert "has 0 clean rows of 1 read" in done.stdout.replace("\n", " ").replace("│", " ")


def test_a_split_that_shrinks_below_half_of_its_current_version_fails(tmp_path: Path) -> None:
    contract = binary_contract([{"split": "train", "pattern": "t.tsv"}], AB)
    ingest(tmp_path, contract, {"t.tsv": GOOD})
    half_broken = b"label\ta\tb\n1\tA cat sits.\tA cat is sitting.\n"  # 1 row against 3
    report, catalog = ingest(tmp_path, contract, {"t.tsv": half_broken})
    assert report.status == "failed"
    assert "1 clean rows against 3 in the current version" in (report.error or "")
    assert "lower that threshold" in (report.error or "")
    assert catalog.read_split("toy", "train").height == 3
    # a shrink the user means: the contract says so, which also makes a new version
    allowed = yaml.safe_load(contract) | {"checks": {"min_share_of_current": 0}}
    report, catalog = ingest(tmp_path, yaml.safe_dump(allowed), {"t.tsv": half_broken})
    assert report.status == "ingested" and catalog.read_split("toy", "train").height == 1


def test_min_clean_share_is_a_contract_threshold(tmp_path: Path) -> None:
    data = GOOD + b"2\tBad.\tLabel.\n7\tBad.\tAgain.\n"  # 3 clean of 5
    strict = binary_contract([{"split": "train", "pattern": "t.tsv"}], AB, checks={"min_clean_share": 0.8})
    report, _ = ingest(tmp_path, strict, {"t.tsv": data})
    assert report.status == "failed" and "keeps 3 of 5 rows, under checks.min_clean_share 0.8" in (
        report.error or ""
    )
    loose = binary_contract([{"split": "train", "pattern": "t.tsv"}], AB, checks={"min_clean_share": 0.5})
    report, _ = ingest(tmp_path / "loose", loose, {"t.tsv": data})
    assert report.status == "ingested" and report.splits[0].reasons == {"label_domain": 2}


def test_quoted_fields_spanning_lines_suggest_quoting_csv(tmp_path: Path) -> None:
    data = (
        b'id,a,b,label\n'
        b'1,"A man plays,\nloudly.","A person plays music.",1\n'
        b'2,"Kids play.","Children\nare playing.",1\n'
        b'3,"A cat.","A\ndog.",0\n'
    )  # fmt: skip
    contract = binary_contract(
        [{"split": "train", "pattern": "p.csv"}],
        AB,
        fmt={"delimiter": ",", "quoting": "none", "header": True, "field_counts": [4]},
    )
    report, _ = ingest(tmp_path, contract, {"p.csv": data})
    assert report.status == "failed"
    assert "set format.quoting: csv" in (report.error or "") and "3 quoted fields span lines" in (
        report.error or ""
    )
    fixed = yaml.safe_load(contract)
    fixed["format"]["quoting"] = "csv"
    report, catalog = ingest(tmp_path / "fixed", yaml.safe_dump(fixed), {"p.csv": data})
    assert report.status == "ingested" and catalog.read_split("toy", "train").height == 3


def test_a_wrong_delimiter_still_says_so(tmp_path: Path) -> None:
    contract = binary_contract([{"split": "train", "pattern": "t.csv"}], AB)
    report, _ = ingest(tmp_path, contract, {"t.csv": b"label,a,b\n1,A.,B.\n0,C.,D.\n"})
    assert report.status == "failed" and "wrong delimiter or wrong file?" in (report.error or "")


def test_swapped_pairs_are_duplicates_for_symmetric_tasks_only(tmp_path: Path) -> None:
    data = GOOD + b"1\tA cat is sitting.\tA cat sits.\n"  # line 5: line 2 with the texts swapped
    contract = binary_contract([{"split": "train", "pattern": "t.tsv"}], AB)
    report, catalog = ingest(tmp_path, contract, {"t.tsv": data})
    assert report.splits[0].reasons == {"duplicate": 1}
    assert "same texts, swapped, as line 2" in catalog.quarantine("toy")["detail"][0]
    directed = binary_contract(
        [{"split": "train", "pattern": "t.tsv"}], AB, checks={"symmetric_pairs": False}
    )
    report, catalog = ingest(tmp_path / "directed", directed, {"t.tsv": data})
    assert report.status == "ingested" and report.splits[0].quarantined == 0
    assert catalog.read_split("toy", "train").height == 4


def test_swapped_pairs_across_splits_are_leakage(tmp_path: Path) -> None:
    from simpair.ingest.leakage import update_leakage

    files = [{"split": "train", "pattern": "train.tsv"}, {"split": "test", "pattern": "test.tsv"}]
    contract = binary_contract(files, AB)
    test = b"label\ta\tb\n1\tA cat is sitting.\tA cat sits.\n1\tNew.\tFresh.\n"
    report, catalog = ingest(tmp_path, contract, {"train.tsv": GOOD, "test.tsv": test})
    assert report.status == "ingested"
    leak = update_leakage(tmp_path / "home")
    assert [(c.split, c.train_split, c.pairs) for c in leak.counts] == [("test", "train", 1)]
    assert_accounted(report, Catalog(tmp_path / "home"))


def test_contract_errors_name_the_field(tmp_path: Path) -> None:
    cases = {
        "split_column.values name splits ['holdout']": {
            "files": [{"split": "train"}],
            "split_column": {"column": "s", "pattern": "x", "values": {"A": "train", "B": "holdout"}},
        },
        "with split_column, files list splits and roles only": {
            "files": [{"split": "train", "pattern": "x"}],
            "split_column": {"column": "s", "pattern": "x", "values": {"A": "train"}},
        },
        "needs a role": {"files": [{"split": "validation", "pattern": "v.tsv"}]},
        "only apply to kind: delimited": {"format": {**TSV3, "kind": "parquet"}},
        "give either text_pair or text_a and text_b": {
            "columns": {**AB, "text_pair": {"column": "a"}},
        },
    }
    for message, change in cases.items():
        base = yaml.safe_load(binary_contract([{"split": "train", "pattern": "t.tsv"}], AB))
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(base | change))
        with pytest.raises(ContractError, match=message.replace("[", r"\[").replace("]", r"\]")):
            load_contract(path)
