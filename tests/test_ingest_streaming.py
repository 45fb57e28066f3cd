"""Streaming ingest gives the same rows wherever the chunk and batch cuts fall.

Each source is ingested twice: with 64-byte chunks and 7-row batches (cuts inside records, between
`\\r` and `\\n`, inside quoted multi-line fields, duplicates whose first copy is in an earlier chunk,
batch or file) and with one chunk per file. Clean files, quarantine and reports must be identical.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from simpair.contracts import load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.reader import read_source

CONTRACT = """\
dataset: s
contract_version: "1"
format: {{delimiter: "{delimiter}", quoting: {quoting}, header: {header}, field_counts: [4]}}
files:
  - {{split: train, role: train, pattern: "train*"}}
  - {{split: test, role: test, pattern: "test*"}}
columns: {{pair_id: 0, label: 1, text_a: 2, text_b: 3}}
label: {{kind: binary, values: [0, 1]}}
checks: {{min_clean_rows: 1}}
"""
LONG = "a sentence long enough that one record spans more than one chunk of sixty-four bytes"
PLAIN_LINES = [
    f"1\t1\t{LONG}\tshort one",
    "2\t0\tcafé  crème \tsecond  text",  # non-ASCII and spaces: per-record path
    f"3\t1\t{LONG}\tshort one",  # duplicate of line 1 (or 2 with a header): another chunk
    "4\tx\tbad label\ttext",
    "5\t1\tthree fields only",
    "",
    "6\t7\tout of domain\ttext",
    "7\t1\t\xa0\ttext",
    "8\t1\tshort one\t" + LONG,  # the same pair swapped
    "9\t0\t   lots   of   spaces   \tplain",
]


def _write(path: Path, data: bytes) -> None:
    if path.suffix == ".gz":
        data = gzip.compress(data)
    elif path.suffix == ".zst":
        with pa.CompressedOutputStream(str(path), "zstd") as out:
            out.write(data)
        return
    path.write_bytes(data)


def _ingest_both(tmp_path: Path, contract_text: str, files: dict[str, bytes]) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    for name, data in files.items():
        _write(sources / name, data)
    (tmp_path / "s.yaml").write_text(contract_text)
    contract = load_contract(tmp_path / "s.yaml")
    small = ingest_dataset(contract, sources, tmp_path / "small", chunk_bytes=64, batch_rows=7)
    whole = ingest_dataset(contract, sources, tmp_path / "whole", chunk_bytes=1 << 24, batch_rows=1 << 20)
    assert small.status == whole.status == "ingested", (small.error, whole.error)
    assert small.model_dump() == whole.model_dump()
    for name in ("train.parquet", "test.parquet", "quarantine.parquet"):
        a = pl.read_parquet(tmp_path / "small" / "datasets" / "s" / small.version / name)
        b = pl.read_parquet(tmp_path / "whole" / "datasets" / "s" / whole.version / name)
        assert a.equals(b), name
    return small  # type: ignore[return-value]


@pytest.mark.parametrize("suffix", ["", ".gz", ".zst"])
def test_plain_lines_same_at_any_cut(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if suffix == "":  # the opt-in worker pool parses the 64-byte chunks in two processes
        monkeypatch.setenv("SIMPAIR_INGEST_WORKERS", "2")
    lines = [line.encode() for line in PLAIN_LINES] + [b"10\t1\t\xff\xfe broken\ttext"]
    crlf = b"\r\n".join(lines[:5]) + b"\r\n" + b"\n".join(lines[5:]) + b"\n"
    files = {
        f"train-1.tsv{suffix}": b"\xef\xbb\xbf" + crlf,
        f"train-2.tsv{suffix}": f"11\t1\t{LONG}\tshort one\n12\t1\tfresh\tpair\n".encode(),  # dup of file 1
        f"test.tsv{suffix}": b"1\t1\tx\ty\n",
    }
    report = _ingest_both(tmp_path, CONTRACT.format(delimiter="\\t", quoting="none", header="false"), files)
    train = report.splits[0]
    assert train.data_records == 13 and train.stats["bom"] == 1 and train.stats["crlf_lines"] == 5
    assert train.reasons["duplicate"] == 3  # line 3, the swapped line 9 and file 2's line 1
    assert {"bad_label", "field_count", "empty_line", "encoding", "label_domain", "empty_text"} <= set(
        train.reasons
    )


def test_quoted_multiline_fields_same_at_any_cut(tmp_path: Path) -> None:
    body = (
        'id,label,a,b\r\n1,1,"a quoted field\r\nthat spans two lines, with a comma",plain\r\n'
        f'2,0,"{LONG}","and ""quotes"" inside"\n3,1,"never closed,x\n4,1,ok,ok\n'
        f'5,1,"a quoted field\nthat spans two lines, with a comma",plain\n'
    )
    files = {"train.csv": body.encode(), "test.csv": b"id,label,a,b\n1,1,x,y\n"}
    contract_text = CONTRACT.format(delimiter=",", quoting="csv", header="true")
    report = _ingest_both(tmp_path, contract_text, files)
    whole_file = read_source(body.encode(), "train.csv", load_contract(tmp_path / "s.yaml").format)
    assert report.splits[0].data_records == len(whole_file.records) == 4
    assert report.splits[0].stats["crlf_lines"] == whole_file.stats["crlf_lines"] == 3


def test_split_files_carry_statistics(tmp_path: Path) -> None:
    """Every column has null counts (the MLflow schema reads nullability from them); ids and lines min/max."""
    import pyarrow.parquet as pq

    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "train.tsv").write_text(f"1\t1\t{LONG}\tshort one\n2\t0\tfresh\tpair\n")
    (sources / "test.tsv").write_text("3\t1\tx\ty\n")
    (tmp_path / "s.yaml").write_text(CONTRACT.format(delimiter="\\t", quoting="none", header="false"))
    report = ingest_dataset(load_contract(tmp_path / "s.yaml"), sources, tmp_path / "home")
    assert report.status == "ingested", report.error
    meta = pq.ParquetFile(tmp_path / "home" / "datasets" / "s" / report.version / "train.parquet").metadata
    columns = {meta.schema.column(i).name: meta.row_group(0).column(i) for i in range(meta.num_columns)}
    assert all(c.statistics.has_null_count and c.statistics.null_count == 0 for c in columns.values()
               if c.path_in_schema not in ("label", "score"))  # fmt: skip
    assert columns["pair_id"].statistics.has_min_max and columns["source_line"].statistics.max == 2
