"""Small flaws in a new source, each ending in a clear quarantine detail, warning or review note.

A stray `n/a` is handled in test_contract_infer.py; here: quarantine details that name the field, the
value and the rule (the same on the vectorised and the per-record path), a CSV-quoted file read with
`quoting: none` (a one-line warning at ingest, and `contract infer` never proposing it), and a UTF-8
file with one accent and one stray byte (kept UTF-8, the bad line quarantined with its byte named).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import yaml
from test_ingest_contract_features import ingest

from simpair.catalog import Catalog
from simpair.contracts import load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.infer import infer_contract

SIMPAIR = str(Path(sys.executable).with_name("simpair"))


def _contract(fmt: dict, label: dict, pattern: str = "train.tsv") -> str:
    return yaml.safe_dump(
        {
            "dataset": "toy",
            "contract_version": "1",
            "format": fmt,
            "files": [{"split": "train", "role": "train", "pattern": pattern}],
            "columns": {"pair_id": "id", "label": "score", "text_a": "a", "text_b": "b"},
            "label": label,
        },
        sort_keys=False,
    )


# ---- quarantine details --------------------------------------------------------------------------

_ROWS = [
    "id\ta\tb\tscore",
    "1\ta man plays\ta guitar\t2.5",
    "2\tempty b\t\t3",
    "3\tout of range\tscore\t7.2",
    "4\tnot a\tnumber\tn/a",
    "5\tboth\t\t-1",
    "6\ttoo few\tfields",
    "7\tlong\tscore\t" + "x" * 60,
]
_GRADED = {"kind": "graded", "range": [0, 5]}


def _details(tmp_path: Path, fmt: dict, label: dict, rows: list[str]) -> list[tuple[int, str, str]]:
    data = "\n".join(rows).encode().replace(b"<ff>", b"\xff") + b"\n"
    report, catalog = ingest(tmp_path, _contract(fmt, label), {"train.tsv": data})
    assert report.status == "ingested", report.error
    rows_ = catalog.quarantine("toy").sort("source_line").select("source_line", "reason", "detail").rows()
    return [(line, reason, detail.removeprefix(f"train.tsv:{line}: ")) for line, reason, detail in rows_]


def test_every_detail_names_the_field_the_value_and_the_rule(tmp_path: Path) -> None:
    fmt = {"delimiter": "\t", "quoting": "none", "header": True, "field_counts": [4]}
    rows = [*_ROWS, "8\tbroken <ff> byte\tb\t1"]
    assert _details(tmp_path / "graded", fmt, _GRADED, rows) == [
        (3, "empty_text", "text_b is empty"),  # was: failed empty_text:text_b
        (4, "score_range", "score 7.2 outside [0, 5]"),  # was: failed score_range:score
        (5, "bad_score", "score 'n/a' is not a number"),
        (6, "empty_text", "text_b is empty; score -1 outside [0, 5]"),
        (7, "field_count", "expected 4 fields, found 3"),
        (8, "bad_score", f"score '{'x' * 39}…' is not a number"),  # shortened to 40 characters
        (9, "encoding", "not valid utf-8: byte \\xff at character 10"),  # was: not valid utf-8
    ]
    binary = [r.replace("\t2.5", "\t1").replace("\t7.2", "\t2").replace("\t3", "\t0") for r in _ROWS[:4]]
    details = _details(tmp_path / "binary", fmt, {"kind": "binary", "values": [0, 1]}, binary)
    assert details == [
        (3, "empty_text", "text_b is empty"),
        (4, "label_domain", "label 2 not in [0, 1]"),  # was: failed label_domain:label
    ]


def test_details_are_the_same_on_the_vectorised_and_the_per_record_path(tmp_path: Path) -> None:
    """`quoting: none` + UTF-8 takes the vectorised path; `quoting: csv` (no quotes here) the other."""
    rows = [*_ROWS, "8\tcafé\tnaïve\t9", "9\tbroken <ff> byte\tb\t1"]
    plain = {"delimiter": "\t", "quoting": "none", "header": True, "field_counts": [4]}
    fast = _details(tmp_path / "fast", plain, _GRADED, rows)
    slow = _details(tmp_path / "csv", {**plain, "quoting": "csv"}, _GRADED, rows)
    assert fast == slow and (9, "score_range", "score 9 outside [0, 5]") in fast


# ---- quoting -------------------------------------------------------------------------------------

_QUESTIONS = ["What is the capital of France?", "How do I learn Python quickly?", "Why is the sky blue?"]


def _quoted_csv(rows: int = 15) -> bytes:
    """Every text quoted CSV-style; odd rows hold a comma (7 of 15), which `quoting: none` splits."""
    lines = ["id,a,b,score"]
    for i in range(rows):
        text = _QUESTIONS[i % 3] + (f", v{i}" if i % 2 else f" v{i}")
        lines.append(f'{i},"{text}","Another question {i}?",{i % 2}')
    return ("\n".join(lines) + "\n").encode()


_BINARY = {"kind": "binary", "values": [0, 1]}
_CSV_AS_NONE = {"delimiter": ",", "quoting": "none", "header": True, "field_counts": [4]}


def test_quoted_texts_under_quoting_none_give_one_warning_line(tmp_path: Path) -> None:
    report, catalog = ingest(tmp_path, _contract(_CSV_AS_NONE, _BINARY, "q.csv"), {"q.csv": _quoted_csv()})
    assert report.status == "ingested" and report.splits[0].reasons == {"field_count": 7}
    assert catalog.read_split("toy", "train")["text_a"][0] == '"What is the capital of France? v0"'
    assert len(report.warnings) == 1
    warning = report.warnings[0]
    assert warning.startswith("16 of 16 clean texts (100%; 16 in train) start and end with '\"'")
    assert "set format.quoting: csv" in warning

    # through the CLI: exit 0 (nothing failed) and the warning as one line of the summary
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "toy.yaml").write_text(_contract(_CSV_AS_NONE, _BINARY, "q.csv"))
    env = {**os.environ, "COLUMNS": "300"}
    args = ["--sources", str(tmp_path / "src"), "--contracts", str(tmp_path / "contracts")]
    run = subprocess.run(
        [SIMPAIR, "ingest", "--no-prefect", *args, "--home", str(tmp_path / "cli-home")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stdout.splitlines() if "clean texts" in line]
    contract_path = str(tmp_path / "contracts" / "toy.yaml")
    assert said == ["toy: warning: " + warning.replace(str(tmp_path / "contract.yaml"), contract_path)]


def test_quotations_in_text_do_not_warn(tmp_path: Path) -> None:
    """MSRP-like: 1.4% of its texts are quotations wrapped in quotes; that is text, not quoting."""
    lines = ["id\ta\tb\tscore"]
    for i in range(100):
        a = f'"We will win {i}."' if i in (3, 50) else f"A man plays guitar {i}."
        lines.append(f"{i}\t{a}\tSomeone plays music {i}.\t{i % 2}")
    fmt = {"delimiter": "\t", "quoting": "none", "header": True, "field_counts": [4]}
    report, _ = ingest(tmp_path, _contract(fmt, _BINARY), {"train.tsv": ("\n".join(lines) + "\n").encode()})
    assert report.status == "ingested" and report.warnings == []


def test_infer_does_not_propose_quoting_none_for_quoted_fields(tmp_path: Path) -> None:
    """Every field of a TSV quoted, one quote never closed: csv reads that record worse, yet the
    fields are quoted, so csv is proposed (today: `none`, and quotes in every text and column name)."""
    lines = ['"id"\t"sentence1"\t"sentence2"\t"label"']
    for i in range(150):
        a = '"A runaway quote here.' if i == 12 else f'"A man plays guitar {i}."'
        lines.append(f'{i}\t{a}\t"Someone plays music {i}."\t{i % 2}')
    path = tmp_path / "quoted.tsv"
    path.write_text("\n".join(lines) + "\n")
    result = infer_contract(path)
    assert result.contract["format"]["quoting"] == "csv"
    assert result.contract["columns"]["text_a"] == "sentence1"
    note = next(n for n in result.notes if "so quoting csv is proposed" in n)
    assert "look at line 14" in note

    # a quoted CSV whose fields hold no comma: quoting csv as before
    path = tmp_path / "all.csv"
    path.write_bytes(_quoted_csv().replace(b", v", b" v"))
    assert infer_contract(path).contract["format"]["quoting"] == "csv"


# ---- encoding ------------------------------------------------------------------------------------


def test_infer_keeps_utf8_for_one_accent_and_one_stray_byte_and_ingest_quarantines_that_line(
    tmp_path: Path,
) -> None:
    lines = [b"id\ta\tb\tlabel"]
    for i in range(20):
        a = f"Un caf\u00e9 {i}" if i == 3 else f"plain text {i}"
        lines.append(f"{i}\t{a}\tother text {i}\t{i % 2}".encode())
    lines[11] = b"10\tbad \xff byte\tother\t1"  # line 12
    src = tmp_path / "src"
    src.mkdir()
    (src / "stray.tsv").write_bytes(b"\n".join(lines) + b"\n")
    draft = infer_contract(src / "stray.tsv")  # today: latin-1, which reads the é as 'Ã©'
    assert draft.contract["format"]["encoding"] == "utf-8"
    assert any(n.startswith("line 12 is not valid UTF-8 (a byte that does not decode)") for n in draft.notes)
    (tmp_path / "stray.yaml").write_text(draft.to_yaml())
    report = ingest_dataset(load_contract(tmp_path / "stray.yaml"), src, tmp_path / "home")
    assert report.status == "ingested", report.error
    catalog = Catalog(tmp_path / "home")
    quarantine = catalog.quarantine("stray")
    assert quarantine.select("source_line", "reason", "detail").rows() == [
        (12, "encoding", "stray.tsv:12: not valid utf-8: byte \\xff at character 8")
    ]
    train = catalog.read_split("stray", "train")
    assert train.filter(pl.col("text_a").str.contains("café")).height == 1
