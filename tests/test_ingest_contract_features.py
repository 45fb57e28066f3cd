"""Each contract feature on a small file written here, each with its row accounting: in = clean + quarantined.

Features: default pair ids across the files of a split, both texts in one field (`text_pair`), splits in
a column (`split_column`), extra typed columns, Parquet, JSON Lines, gzip and zstd, an empty file in a
multi-file split, and an `s3://` source served by a real moto S3 server.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from simpair.catalog import Catalog
from simpair.contracts import load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.report import DatasetReport

SIMPAIR = str(Path(sys.executable).with_name("simpair"))


def ingest(tmp_path: Path, contract_yaml: str, files: dict[str, bytes]) -> tuple[DatasetReport, Catalog]:
    """Write the files under tmp_path/src and the contract, ingest, and check the lossless promise."""
    src = tmp_path / "src"
    for name, data in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    contract_path = tmp_path / "contract.yaml"
    contract_path.write_text(textwrap.dedent(contract_yaml))
    report = ingest_dataset(load_contract(contract_path), src, tmp_path / "home")
    catalog = Catalog(tmp_path / "home")
    if report.status != "failed":
        assert_accounted(report, catalog)
    return report, catalog


def assert_accounted(report: DatasetReport, catalog: Catalog) -> None:
    """Every record read is a clean row or a quarantined row, per split and in total."""
    quarantine = catalog.quarantine(report.dataset)
    clean_total = 0
    for split in report.splits:
        clean = catalog.read_split(report.dataset, split.split)
        assert clean.height == split.clean
        assert split.clean + split.quarantined == split.data_records
        assert quarantine.filter(pl.col("split") == split.split).height == split.quarantined
        clean_total += clean.height
    assert quarantine.filter(pl.col("split").is_null()).height == report.unassigned
    manifest = catalog.manifest(report.dataset)
    assert clean_total + quarantine.height == manifest["source"]["records"]


TSV3 = {"delimiter": "\t", "quoting": "none", "header": True, "field_counts": [3]}
AB = {"label": "label", "text_a": "a", "text_b": "b"}


def binary_contract(files: list[dict], columns: dict, fmt: dict | None = None, **more: object) -> str:
    """A binary-label contract named `toy` as YAML."""
    contract = {
        "dataset": "toy",
        "contract_version": "1",
        "format": TSV3 if fmt is None else fmt,
        "files": files,
        "columns": columns,
        "label": {"kind": "binary", "values": [0, 1]},
        **more,
    }
    return yaml.safe_dump(contract, sort_keys=False)


def test_default_pair_ids_stay_unique_across_the_files_of_a_split(tmp_path: Path) -> None:
    day = b"label\ta\tb\n1\tA cat sits.\tA cat is sitting.\n0\tIt rains.\tThe sun shines.\n"
    day2 = b"label\ta\tb\n1\tA dog runs.\tA dog is running.\n0\tHe reads.\tShe sings.\n"
    contract = binary_contract([{"split": "train", "role": "train", "pattern": "toy/train-*.tsv"}], AB)
    report, catalog = ingest(tmp_path, contract, {"toy/train-1.tsv": day, "toy/train-2.tsv": day2})
    assert report.status == "ingested", report.error
    train = catalog.read_split("toy", "train")
    assert train.height == 4 and report.splits[0].quarantined == 0  # the bug kept 2 of these 4 rows
    assert sorted(train["pair_id"]) == [
        "train-train-1-2",
        "train-train-1-3",
        "train-train-2-2",
        "train-train-2-3",
    ]
    manifest = catalog.manifest("toy")
    assert manifest["ingest_code_version"] == "3" and "file stem" in manifest["pair_id"]


def test_text_pair_splits_one_field_into_two_texts(tmp_path: Path) -> None:
    data = (
        b'pair,label\n'
        b'"A man plays a guitar.\nA person plays music.",1\n'  # lines 2-3
        b'"Only one sentence here.",0\n'  # 4: one part
        b'"One.\nTwo.\nThree.",1\n'  # 5-7: three parts
        b'"A dog barks.\n",0\n'  # 8-9: the trailing separator is trimmed: one part
        b'"Kids play.\nChildren are playing.",1\n'  # 10-11
    )  # fmt: skip
    contract = binary_contract(
        [{"split": "train", "pattern": "pairs.csv"}],
        {"text_pair": {"column": "pair", "separator": "\n"}, "label": "label"},
        fmt={"delimiter": ",", "quoting": "csv", "header": True, "field_counts": [2]},
    )
    report, catalog = ingest(tmp_path, contract, {"pairs.csv": data})
    assert report.status == "ingested", report.error
    train = catalog.read_split("toy", "train")
    assert train.select("text_a", "text_b").rows() == [
        ("A man plays a guitar.", "A person plays music."),
        ("Kids play.", "Children are playing."),
    ]
    assert report.splits[0].reasons == {"text_pair": 3}
    details = catalog.quarantine("toy").sort("source_line")["detail"].to_list()
    assert (
        "found 1 part(s)" in details[0]
        and "found 3 part(s)" in details[1]
        and "found 1 part(s)" in details[2]
    )


SICK = (
    "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_label\tSemEval_set\n"
    "1\tA kid plays.\tA child is playing.\t4.5\tENTAILMENT\tTRAIN\n"
    "2\tA man cooks.\tA woman swims.\t1.2\tNEUTRAL\tTRAIN\n"
    "3\tA cat sleeps.\tNo cat is sleeping.\t3.1\tCONTRADICTION\tTRIAL\n"
    "4\tA dog runs.\tA dog is running.\t5\tENTAILMENT\tTEST\n"
    "5\tBirds fly.\tSome birds are flying.\t4.0\tENTAILMENT\tHOLDOUT\n"  # not mapped: quarantined, no split
    "6\tA  boy jumps.\tA boy is jumping.\t4.9\tENTAILMENT\t test \n"  # value trimmed; text cleaned
)
SICK_CONTRACT = """\
    dataset: sick
    contract_version: "1"
    format: {delimiter: "\\t", quoting: none, header: true, field_counts: [6]}
    files:
      - {split: train}
      - {split: trial, role: dev}
      - {split: test}
    split_column:
      column: SemEval_set
      pattern: sick/SICK.txt
      values: {TRAIN: train, TRIAL: trial, TEST: test, test: test}
    columns:
      pair_id: pair_ID
      text_a: sentence_A
      text_b: sentence_B
      label: relatedness_score
      extra: [entailment_label, {name: relatedness_raw, column: relatedness_score, type: float}]
    label: {kind: graded, range: [1, 5]}
    """


def test_split_column_assigns_rows_keeps_roles_and_quarantines_unmapped_values(tmp_path: Path) -> None:
    report, catalog = ingest(tmp_path, SICK_CONTRACT, {"sick/SICK.txt": SICK.encode()})
    assert report.status == "ingested", report.error
    assert catalog.splits("sick") == {"train": "train", "trial": "dev", "test": "test"}
    assert catalog.read_split("sick", "train")["pair_id"].to_list() == ["1", "2"]
    assert catalog.read_split("sick", "trial")["pair_id"].to_list() == ["3"]
    assert catalog.read_split("sick", "test")["pair_id"].to_list() == ["4", "6"]
    assert report.unassigned == 1 and report.unassigned_reasons == {"unmapped_split": 1}
    assert report.fixes == {"whitespace_fixes": 1}  # fixes of a split_column source are kept source-wide
    [row] = catalog.quarantine("sick").rows(named=True)
    assert row["split"] is None and row["source_line"] == 6 and "'HOLDOUT' maps to no split" in row["detail"]


def test_extra_columns_are_kept_typed_and_listed_in_the_manifest(tmp_path: Path) -> None:
    report, catalog = ingest(tmp_path, SICK_CONTRACT, {"sick/SICK.txt": SICK.encode()})
    train = catalog.read_split("sick", "train")
    assert train.schema["entailment_label"] == pl.Utf8 and train.schema["relatedness_raw"] == pl.Float64
    assert train["entailment_label"].to_list() == ["ENTAILMENT", "NEUTRAL"]
    assert train["relatedness_raw"].to_list() == [4.5, 1.2]
    assert catalog.manifest("sick")["source"]["extra_columns"] == {
        "entailment_label": "string",
        "relatedness_raw": "float",
    }
    assert report.extra_columns == {"entailment_label": "string", "relatedness_raw": "float"}


def test_an_extra_value_of_the_wrong_type_is_quarantined(tmp_path: Path) -> None:
    data = b"label\ta\tb\tvotes\n1\tA cat.\tA kitten.\t3\n0\tRain.\tSun.\tmany\n1\tGo.\tLeave.\t\n"
    contract = binary_contract(
        [{"split": "train", "pattern": "t.tsv"}],
        {**AB, "extra": [{"name": "votes", "type": "int"}]},
        fmt={**TSV3, "field_counts": [4]},
    )
    report, catalog = ingest(tmp_path, contract, {"t.tsv": data})
    assert report.status == "ingested", report.error
    assert catalog.read_split("toy", "train")["votes"].to_list() == [3, None]  # blank is null
    assert report.splits[0].reasons == {"bad_extra": 1}
    assert "votes 'many' is not int" in catalog.quarantine("toy")["detail"][0]


def test_parquet_source_with_typed_and_null_values(tmp_path: Path) -> None:
    table = pa.table(
        {
            "id": [10, 11, 12, 13],
            "q1": ["How do I cook rice?", None, "What is AI?", "Is it late?"],
            "q2": ["How is rice cooked?", "Where is it?", "Define AI.", "Is it early?"],
            "dup": [True, False, None, False],
            "topic": ["food", "travel", "tech", "time"],
        }
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    contract = binary_contract(
        [{"split": "train", "pattern": "q/*.parquet"}],
        {"pair_id": "id", "text_a": "q1", "text_b": "q2", "label": "dup", "extra": ["topic"]},
        fmt={"kind": "parquet"},
    )
    report, catalog = ingest(tmp_path, contract, {"q/part-0.parquet": buffer.getvalue()})
    assert report.status == "ingested", report.error
    train = catalog.read_split("toy", "train")
    assert train.select("pair_id", "label", "topic").rows() == [("10", 1, "food"), ("13", 0, "time")]
    assert report.splits[0].reasons == {"empty_text": 1, "bad_label": 1}
    assert set(catalog.quarantine("toy")["source_line"]) == {2, 3}  # row numbers


def test_jsonl_gz_source_quarantines_lines_that_are_not_objects(tmp_path: Path) -> None:
    lines = [
        json.dumps({"s1": "A cat sits.", "s2": "A cat is sitting.", "y": 1}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"s1": "It rains.", "s2": "It pours.", "y": 1, "note": "extra key"}),
        json.dumps({"s1": "He runs.", "s2": "She walks.", "y": 0}),
    ]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    contract = binary_contract(
        [{"split": "train", "pattern": "*.jsonl.gz"}],
        {"text_a": "s1", "text_b": "s2", "label": "y"},
        {"kind": "jsonl"},
    )
    report, catalog = ingest(tmp_path, contract, {"pairs.jsonl.gz": data})
    assert report.status == "ingested", report.error
    assert catalog.read_split("toy", "train")["label"].to_list() == [1, 1, 0]
    assert report.splits[0].reasons == {"json_parse": 2}
    assert catalog.read_split("toy", "train")["pair_id"][0] == "train-pairs-1"  # stem drops .jsonl.gz


def test_zstd_compressed_tsv(tmp_path: Path) -> None:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as stream:
        stream.write(b"label\ta\tb\n1\tA cat.\tA kitten.\n0\tRain.\tSun.\nx\tBad.\tLabel.\n")
    contract = binary_contract([{"split": "train", "pattern": "t.tsv.zst"}], AB)
    report, catalog = ingest(tmp_path, contract, {"t.tsv.zst": sink.getvalue().to_pybytes()})
    assert report.status == "ingested", report.error
    assert catalog.read_split("toy", "train").height == 2 and report.splits[0].reasons == {"bad_label": 1}


def test_damaged_archive_fails_the_source_naming_the_file(tmp_path: Path) -> None:
    contract = binary_contract([{"split": "train", "pattern": "t.tsv.gz"}], AB)
    report, _ = ingest(tmp_path, contract, {"t.tsv.gz": b"label\ta\tb\n1\tnot\tgzip\n"})
    assert report.status == "failed" and "t.tsv.gz: cannot decompress as gzip" in (report.error or "")


def test_empty_file_in_a_multi_file_split_is_recorded_not_fatal(tmp_path: Path) -> None:
    contract = binary_contract([{"split": "train", "pattern": "drops/*.tsv"}], AB)
    files = {
        "drops/2026-11-23.tsv": b"label\ta\tb\n1\tA cat.\tA kitten.\n",
        "drops/2026-11-24.tsv": b"",  # nothing that day
        "drops/2026-11-25.tsv": b"label\ta\tb\n",  # a header alone
    }
    report, catalog = ingest(tmp_path, contract, files)
    assert report.status == "ingested", report.error
    assert report.splits[0].empty_files == ["drops/2026-11-24.tsv", "drops/2026-11-25.tsv"]
    assert catalog.manifest("toy")["source"]["empty_files"] == report.splits[0].empty_files
    assert catalog.read_split("toy", "train").height == 1
    # a split's only file being empty is still an error, with the message it always had
    single = binary_contract([{"split": "train", "pattern": "e.tsv"}], AB)
    report, _ = ingest(tmp_path / "single", single, {"e.tsv": b""})
    assert report.status == "failed" and "e.tsv: file is empty" in (report.error or "")


@pytest.mark.slow
def test_s3_source_ingests_with_a_contract_alone(s3_env: dict[str, str], tmp_path: Path) -> None:
    from test_scoring_s3 import s3_client

    fs = s3_client(s3_env)
    fs.mkdir("raw")
    fs.pipe("raw/sick/SICK.txt.gz", gzip.compress(SICK.encode()))
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "sick.yaml").write_text(
        textwrap.dedent(SICK_CONTRACT).replace("sick/SICK.txt", "sick/SICK.txt.gz")
    )
    home = tmp_path / "home"
    cmd = [SIMPAIR, "ingest", "--no-prefect", "--sources", "s3://raw", "--home", str(home),
           "--contracts", str(tmp_path / "contracts"), "--report-json", str(tmp_path / "r.json")]  # fmt: skip
    done = subprocess.run(cmd, env={**os.environ, **s3_env}, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [report] = [DatasetReport(**d) for d in json.loads((tmp_path / "r.json").read_text())["datasets"]]
    assert report.status == "ingested" and report.splits[0].files == ["sick/SICK.txt.gz"]
    catalog = Catalog(home)
    assert_accounted(report, catalog)
    assert catalog.manifest("sick")["sources_root"] == "s3://raw"
    assert catalog.read_split("sick", "test")["pair_id"].to_list() == ["4", "6"]
    # unchanged bytes in the bucket: nothing to do on the next run
    again = subprocess.run(cmd, env={**os.environ, **s3_env}, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0 and "nothing changed" in again.stdout
