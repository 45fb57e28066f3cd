"""Rows taken out after the parse (later copies of a pair, bad extra values) are quarantined with their
raw line exactly as it was in the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from simpair.catalog import Catalog
from simpair.contracts import load_contract
from simpair.ingest.dataset import ingest_dataset

CONTRACT = """\
dataset: r
contract_version: "1"
format: {delimiter: "\\t", quoting: none, header: false, field_counts: [5]}
files:
  - {split: train, role: train, pattern: "train*"}
  - {split: test, role: test, pattern: "test*"}
columns:
  pair_id: 0
  label: 1
  text_a: 2
  text_b: 3
  extra: [{name: weight, column: 4, type: int}]
label: {kind: binary, values: [0, 1]}
checks: {min_clean_rows: 1}
"""


@pytest.mark.parametrize("chunk_bytes", [64, 300, 1 << 20])
def test_quarantined_rows_keep_their_raw_lines(tmp_path: Path, chunk_bytes: int) -> None:
    texts = ["a café for two", "they don’t stop", "plain words here", "中文 and more", "x  y"]
    lines = [f"{i}\t{i % 2}\t{texts[i % 5]} {i // 5}\tother side {i % 3}\t{i}" for i in range(40)]
    lines += [
        f"{40 + i}\t{i % 2}\t{texts[i % 5]} {i // 5}\tother side {i % 3}\t{i}" for i in range(10)
    ]  # copies
    lines += [f"{50 + i}\t1\tfresh {i}\tpair {i}\tnot a number {i}" for i in range(3)]  # bad extra
    lines += ["53\t0\tother side 0\ta café for two 0\t7"]  # line 1 swapped: a copy too
    sources = tmp_path / "sources"
    sources.mkdir()
    body = "\r\n".join(lines[:20]) + "\r\n" + "\n".join(lines[20:]) + "\n"
    (sources / "train.tsv").write_bytes(body.encode())
    (sources / "test.tsv").write_text("100\t1\tx\ty\t1\n")
    (tmp_path / "r.yaml").write_text(CONTRACT)
    report = ingest_dataset(
        load_contract(tmp_path / "r.yaml"), sources, tmp_path / "home", chunk_bytes=chunk_bytes
    )
    assert report.status == "ingested", report.error
    quarantine = Catalog(tmp_path / "home").quarantine("r")
    assert sorted(quarantine["reason"].to_list()) == ["bad_extra"] * 3 + ["duplicate"] * 11
    for row in quarantine.iter_rows(named=True):
        assert row["raw_line"] == lines[row["source_line"] - 1]
