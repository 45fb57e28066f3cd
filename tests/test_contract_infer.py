"""`simpair contract infer` drafts a contract that loads, from each kind of file a user brings.

Each fixture is a few rows written here, shaped like a real export (QQP-style CSV, STS-B-style TSV,
SICK with its split column, both texts in one cell, JSON Lines, Parquet). Every draft must validate as
a Contract and survive its own YAML rendering, since the user is meant to save it and edit it. Then the
saved draft must ingest the very file it was drafted from: the clean rows (texts, label, split) are
compared with the rows the fixture wrote, read back by Python's own csv/json/pyarrow, never by
simpair's reader.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from simpair.catalog import Catalog
from simpair.cli import app
from simpair.contracts import Contract, load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.infer import InferError, InferredContract, infer_contract

Row = tuple[str, str, float]  # text_a, text_b, label (binary) or score as written (graded)


def _valid(result: InferredContract) -> Contract:
    """The draft validates, and its YAML (comments and all) reads back as the same dict."""
    contract = Contract.model_validate(result.contract)
    text = result.to_yaml()
    assert yaml.safe_load(text) == result.contract
    assert "# review:" in text
    return contract


def _tidy(text: str) -> str:
    """A fixture text as ingest cleans it: these fixtures only need their whitespace collapsed."""
    return " ".join(text.split())


def _clean_rows(home: Path, contract: Contract) -> dict[str, list[Row]]:
    """The current version's clean rows per split, in source order, as (text_a, text_b, label)."""
    catalog = Catalog(home)
    label = "label" if contract.label.kind == "binary" else "score_raw"
    rows: dict[str, list[Row]] = {}
    for file in contract.files:
        frame = catalog.read_split(contract.dataset, file.split).sort("source_line")
        rows[file.split] = list(frame.select("text_a", "text_b", label).iter_rows())
    return rows


def _ingest_draft(
    result: InferredContract, sources: str | Path, tmp_path: Path, quarantined: tuple[int, ...] = ()
) -> dict[str, list[Row]]:
    """Save the draft as a user would, ingest its own source with it and return the clean rows.

    Only the source lines in `quarantined` may be quarantined; every other record must come out clean.
    """
    draft = tmp_path / "drafts" / f"{result.contract['dataset']}.yaml"
    draft.parent.mkdir(parents=True, exist_ok=True)
    draft.write_text(result.to_yaml())
    contract = load_contract(draft)
    home = tmp_path / "home"
    report = ingest_dataset(contract, sources, home)
    assert report.status == "ingested", report.error
    assert tuple(Catalog(home).quarantine(contract.dataset)["source_line"].sort()) == quarantined
    return _clean_rows(home, contract)


def _qqp_rows() -> list[Row]:
    records = list(csv.reader(io.StringIO(QQP_CSV)))[1:]
    return [(_tidy(a), _tidy(b), int(label)) for _, a, b, label in records]


QQP_CSV = (
    "id,question1,question2,is_duplicate\n"
    '1,"What is the best way to learn Python, quickly?","How do I learn Python fast?",1\n'
    '2,"Why is the sky blue?","What is the\nchemical formula of water?",0\n'
    '3,"How do I cook rice?","How do you cook rice, step by step?",1\n'
    '4,"Is ""Dune"" a good book?","What are the best novels of 1965?",0\n'
    "5,What is love?,Who wrote Hamlet?,0\n"
)


def test_headered_csv_with_multiline_quoted_fields(tmp_path: Path) -> None:
    path = tmp_path / "quora.csv"
    path.write_text(QQP_CSV)
    result = infer_contract(path)
    contract = _valid(result)
    fmt = contract.format
    assert (fmt.kind, fmt.delimiter, fmt.quoting, fmt.header, fmt.field_counts) == (
        "delimited",
        ",",
        "csv",
        True,
        [4],
    )
    assert (contract.columns.text_a, contract.columns.text_b) == ("question1", "question2")
    assert contract.columns.label == "is_duplicate" and contract.columns.pair_id == "id"
    assert contract.label.kind == "binary" and contract.label.values == [0, 1]
    assert contract.dataset == "quora" and contract.split_column is None
    assert [(f.split, f.role, f.pattern) for f in contract.files] == [("train", "train", "quora.csv")]
    assert _ingest_draft(result, tmp_path, tmp_path) == {"train": _qqp_rows()}


STSB_ROWS = [
    (
        "main-news",
        "MSRpar",
        "2012test",
        "0001",
        "4.800",
        "A man is playing a flute.",
        "A man plays the flute.",
    ),
    ("main-news", "MSRpar", "2012test", "0004", "0.200", "Stocks fell on Monday.", "The cat sat on the mat."),
    ("main-captions", "MSRvid", "2012test", "0005", "3.500", '"Hello there, he said.', "He greeted them."),
    (
        "main-captions",
        "MSRvid",
        "2012test",
        "0006",
        "2.750",
        "A woman slices an onion.",
        "A woman cuts food.",
    ),
    ("main-forums", "deft-forum", "2014", "0007", "1.000", "Why do birds sing?", "Birds sing at dawn."),
    ("main-forums", "deft-forum", "2014", "0008", "5.000", "It is raining hard.", "It rains heavily."),
]


def test_headerless_tsv_with_graded_score(tmp_path: Path) -> None:
    lines = ["\t".join(row) for row in STSB_ROWS]
    lines.append(
        "\t".join([*STSB_ROWS[0][:3], "0009", "3.0", "A dog runs.", "A dog is running.", "src", "lic"])
    )
    path = tmp_path / "sts-train.csv"
    path.write_text("\n".join(lines) + "\n")
    result = infer_contract(path, dataset="stsb")
    contract = _valid(result)
    fmt = contract.format
    assert (fmt.delimiter, fmt.quoting, fmt.header) == ("\t", "none", False)
    assert fmt.field_counts == [7, 9]  # a 9-field row is 1 in 7: allowed, not quarantined
    assert (contract.columns.text_a, contract.columns.text_b, contract.columns.label) == (5, 6, 4)
    assert contract.label.kind == "graded" and contract.label.range == (0.0, 5.0)
    assert contract.dataset == "stsb" and contract.columns.pair_id is None
    notes = " ".join(result.notes)
    assert "quotes" in notes and "documented scale" in notes and "pair_id" in notes
    written = [line.split("\t") for line in lines]  # quoting none: a quote is text
    expected = [(r[5], r[6], float(r[4])) for r in written]
    assert _ingest_draft(result, tmp_path, tmp_path) == {contract.files[0].split: expected}


SICK_TSV = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_label\tSemEval_set\n" + "".join(
    f"{i}\tA {thing} is being played by a man.\tA man is playing a {thing} on stage."
    f"\t{score}\t{label}\t{split}\n"
    for i, (thing, score, label, split) in enumerate(
        [
            ("guitar", "4.5", "ENTAILMENT", "TRAIN"),
            ("flute", "3.6", "NEUTRAL", "TRAIN"),
            ("piano", "1.2", "CONTRADICTION", "TRAIN"),
            ("drum", "4.9", "ENTAILMENT", "TRIAL"),
            ("violin", "2.3", "NEUTRAL", "TRIAL"),
            ("harp", "3.3", "CONTRADICTION", "TEST"),
            ("trumpet", "1.0", "NEUTRAL", "TEST"),
        ],
        start=1,
    )
)


def test_sick_style_split_column_and_class_label(tmp_path: Path) -> None:
    path = tmp_path / "SICK.txt"
    path.write_text(SICK_TSV)
    result = infer_contract(path)
    contract = _valid(result)
    assert contract.dataset == "sick"
    assert contract.split_column is not None
    assert contract.split_column.column == "SemEval_set" and contract.split_column.pattern == "SICK.txt"
    assert contract.split_column.values == {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}
    assert [(f.split, f.role, f.pattern) for f in contract.files] == [
        ("train", "train", None),
        ("dev", "dev", None),
        ("test", "test", None),
    ]
    columns = contract.columns
    assert (columns.text_a, columns.text_b, columns.label) == (
        "sentence_A",
        "sentence_B",
        "relatedness_score",
    )
    assert columns.pair_id == "pair_ID"
    assert [(e.name, e.source) for e in columns.extra] == [("entailment_label", "entailment_label")]
    assert contract.label.kind == "graded" and contract.label.range == (1.0, 5.0)
    assert _ingest_draft(result, tmp_path, tmp_path) == _sick_rows()


def _sick_rows() -> dict[str, list[Row]]:
    """SICK_TSV's rows per split, by its SemEval_set column, read with Python's csv module."""
    splits = {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}
    rows: dict[str, list[Row]] = {"train": [], "dev": [], "test": []}
    for record in csv.DictReader(io.StringIO(SICK_TSV), delimiter="\t"):
        row = (record["sentence_A"], record["sentence_B"], float(record["relatedness_score"]))
        rows[splits[record["SemEval_set"]]].append(row)
    return rows


def test_both_texts_in_one_quoted_field(tmp_path: Path) -> None:
    rows = [
        ("p1", "The cat sat on the mat.\nA cat was sitting on a mat.", 1),
        ("p2", "Stocks fell sharply.\nThe weather was sunny.", 0),
        ("p3", "He bought a car.\nHe purchased a vehicle.", 1),
        ("p4", "She likes tea, not coffee.\nCoffee is her favourite.", 0),
    ]
    path = tmp_path / "pairs.csv"
    path.write_text("pair_id,pair,label\n" + "".join(f'{i},"{t}",{y}\n' for i, t, y in rows))
    result = infer_contract(path)
    contract = _valid(result)
    assert contract.format.quoting == "csv" and contract.format.header is True
    assert contract.columns.text_pair is not None
    assert (contract.columns.text_pair.column, contract.columns.text_pair.separator) == ("pair", "\n")
    assert contract.columns.text_a is None and contract.columns.pair_id == "pair_id"
    expected = [(*text.split("\n"), label) for _, text, label in rows]
    assert _ingest_draft(result, tmp_path, tmp_path) == {contract.files[0].split: expected}


def test_gzipped_json_lines(tmp_path: Path) -> None:
    rows = [
        {
            "id": f"q{i}",
            "text1": f"How old is the tower number {i}?",
            "text2": f"Tower {i} age",
            "label": i % 2,
        }
        for i in range(6)
    ]
    path = tmp_path / "export.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    result = infer_contract(path)
    contract = _valid(result)
    assert contract.format.kind == "jsonl" and contract.format.compression == "infer"
    assert contract.dataset == "export"
    assert (contract.columns.text_a, contract.columns.text_b, contract.columns.label) == (
        "text1",
        "text2",
        "label",
    )
    assert contract.columns.pair_id == "id" and contract.label.values == [0, 1]
    assert any("gzip" in note for note in result.notes)
    expected = [(r["text1"], r["text2"], r["label"]) for r in rows]
    assert _ingest_draft(result, tmp_path, tmp_path) == {contract.files[0].split: expected}


def test_parquet(tmp_path: Path) -> None:
    table = pa.table(
        {
            "row": [10, 11, 12, 13],
            "sentence1": ["A plane is taking off.", "A man plays a flute.", "Kids play.", "It rains."],
            "sentence2": ["An air plane departs.", "A man plays music.", "Children are playing.", "Sun."],
            "similarity": [4.8, 3.2, 4.4, 0.3],
        }
    )
    path = tmp_path / "sts.parquet"
    pq.write_table(table, path)
    result = infer_contract(path)
    contract = _valid(result)
    assert contract.format.kind == "parquet" and contract.format.delimiter is None
    assert (contract.columns.text_a, contract.columns.text_b) == ("sentence1", "sentence2")
    assert contract.columns.label == "similarity" and contract.label.range == (0.0, 5.0)
    written = pq.read_table(path).to_pylist()
    expected = [(r["sentence1"], r["sentence2"], r["similarity"]) for r in written]
    assert _ingest_draft(result, tmp_path, tmp_path) == {contract.files[0].split: expected}


def test_fsspec_url(tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    root = f"/infer-test/{tmp_path.name}"
    fs.pipe(f"{root}/quora.csv.gz", gzip.compress(QQP_CSV.encode()))
    try:
        result = infer_contract(f"memory://{root}/quora.csv.gz")
        contract = _valid(result)
        assert (contract.format.compression, contract.format.quoting) == ("infer", "csv")
        assert contract.files[0].pattern == "quora.csv.gz" and contract.dataset == "quora"
        assert _ingest_draft(result, f"memory://{root}", tmp_path) == {"train": _qqp_rows()}
        with pytest.raises(InferError, match=f"memory://{root}/missing.csv"):
            infer_contract(f"memory://{root}/missing.csv")
    finally:
        fs.rm(root, recursive=True)


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tsv"
    empty.write_bytes(b"\xef\xbb\xbf\n\n")
    binary = tmp_path / "image.csv"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    missing = tmp_path / "nowhere.csv"
    broken_gz = tmp_path / "broken.tsv.gz"
    broken_gz.write_bytes(b"not gzip at all\n")
    cases = {empty: "empty", binary: "binary", missing: "cannot read", broken_gz: "decompress"}
    for path, expected in cases.items():
        with pytest.raises(InferError) as info:
            infer_contract(path)
        assert str(path) in str(info.value) and expected in str(info.value), str(info.value)


def test_latin1_file_with_bom_is_noted(tmp_path: Path) -> None:
    text = "label\ttext_a\ttext_b\n1\tCafé crème\tUn café\n0\tÉté\tHiver froid\n1\tNaïve\tIngénue\n"
    path = tmp_path / "fr.tsv"
    path.write_bytes(text.encode("latin-1"))
    result = infer_contract(path)
    assert _valid(result).format.encoding == "latin-1"
    assert any("not valid UTF-8" in note for note in result.notes)
    records = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    expected = {"train": [(r["text_a"], r["text_b"], int(r["label"])) for r in records]}
    assert _ingest_draft(result, tmp_path, tmp_path / "latin-1") == expected
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    result = infer_contract(path)
    fmt = _valid(result).format
    assert (fmt.encoding, fmt.bom, fmt.header) == ("utf-8", "allow", True)
    assert _ingest_draft(result, tmp_path, tmp_path / "utf-8") == expected


def test_cli_infer_prints_a_contract_that_check_accepts(tmp_path: Path) -> None:
    source = tmp_path / "SICK.txt"
    source.write_text(SICK_TSV)
    runner = CliRunner()
    result = runner.invoke(
        app, ["contract", "infer", str(source), "--dataset", "sick2", "--sample-rows", "50"]
    )
    assert result.exit_code == 0, result.output
    assert Contract.model_validate(yaml.safe_load(result.stdout)).dataset == "sick2"
    draft = tmp_path / "sick2.yaml"
    draft.write_text(result.stdout)
    checked = runner.invoke(app, ["contract", "check", str(draft)])
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.startswith("ok: dataset sick2, splits train, dev, test")
    # the checked draft ingests its own source through `simpair ingest`
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    (contracts / "sick2.yaml").write_text(result.stdout)
    home = tmp_path / "home"
    ingested = runner.invoke(app, _ingest_args(tmp_path, contracts, home))
    assert ingested.exit_code == 0, ingested.output
    assert _clean_rows(home, load_contract(draft)) == _sick_rows()
    assert Catalog(home).quarantine("sick2").height == 0

    broken = tmp_path / "broken.yaml"
    broken.write_text(result.stdout.replace("quoting: none", "quotng: none"))
    failed = runner.invoke(app, ["contract", "check", str(broken)])
    assert failed.exit_code == 1
    assert str(broken) in failed.stderr and "format.quotng" in failed.stderr


def _ingest_args(sources: Path, contracts: Path, home: Path) -> list[str]:
    """`simpair ingest` in this process (no Prefect server), strict: a quarantined row exits 3."""
    places = ["--sources", str(sources), "--contracts", str(contracts), "--home", str(home)]
    return ["ingest", *places, "--no-prefect", "--strict"]


def test_cli_infer_fails_with_the_file_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.csv"
    result = CliRunner().invoke(app, ["contract", "infer", str(missing)])
    assert result.exit_code == 1
    assert isinstance(result.exception, InferError) and str(missing) in str(result.exception)


# ---- small flaws: a stray label value, a failed write --------------------------------------------

_SCORES = [0.5, 1.5, 2.5, 3.5, 4.5, 1.0, 2.0, "n/a", 3.0, 4.0, 0.0, 5.0, 2.2, 3.3, 4.4]


def _graded_with_one_na() -> str:
    """An STS-style TSV whose score column has one `n/a` among 15 rows (today: no label found)."""
    rows = ["sentence1\tsentence2\tscore"]
    for i, score in enumerate(_SCORES):
        rows.append(f"A man is playing guitar number {i}.\tSomeone plays an instrument {i}.\t{score}")
    return "\n".join(rows) + "\n"


def _graded_rows() -> list[Row]:
    """The rows of `_graded_with_one_na` that have a score, read with Python's csv module."""
    records = csv.DictReader(io.StringIO(_graded_with_one_na()), delimiter="\t")
    return [(r["sentence1"], r["sentence2"], float(r["score"])) for r in records if r["score"] != "n/a"]


def test_a_stray_non_number_keeps_the_label_column_and_is_named_for_review(tmp_path: Path) -> None:
    path = tmp_path / "sts.tsv"
    path.write_text(_graded_with_one_na())
    result = infer_contract(path)
    contract = _valid(result)
    assert contract.columns.label == "score"
    assert (contract.label.kind, contract.label.range) == ("graded", (0.0, 5.0))
    assert "# review: the label 'score' is not a number in 1 of 15" in result.to_yaml()
    assert (
        "the label 'score' is not a number in 1 of 15 sampled rows (line 9: 'n/a'): ingest quarantines "
        "those rows as bad_score"
    ) in result.notes
    assert _ingest_draft(result, tmp_path, tmp_path, quarantined=(9,)) == {"train": _graded_rows()}
    quarantine = Catalog(tmp_path / "home").quarantine(contract.dataset)
    assert quarantine["reason"].to_list() == ["bad_score"]


def test_a_column_mostly_not_numbers_is_still_no_label(tmp_path: Path) -> None:
    rows = ["a\tb\tc"] + [f"text {i}\tother {i}\t{i if i < 5 else 'x' + str(i)}" for i in range(15)]
    path = tmp_path / "none.tsv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(InferError, match="no numeric column to use as the label"):
        infer_contract(path)


def test_cli_infer_out_writes_the_draft_only_on_success(tmp_path: Path) -> None:
    runner = CliRunner()
    source = tmp_path / "sts.tsv"
    source.write_text(_graded_with_one_na())
    out = tmp_path / "sts.yaml"
    result = runner.invoke(app, ["contract", "infer", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and str(out) in result.stderr
    assert Contract.model_validate(yaml.safe_load(out.read_text())).columns.label == "score"

    # a failed inference leaves no file (a `>` redirect would leave an empty one) and keeps an old one
    missing_out = tmp_path / "missing.yaml"
    failed = runner.invoke(
        app, ["contract", "infer", str(tmp_path / "missing.csv"), "--out", str(missing_out)]
    )
    assert failed.exit_code == 1 and isinstance(failed.exception, InferError)
    assert not missing_out.exists()
    before = out.read_text()
    failed = runner.invoke(app, ["contract", "infer", str(tmp_path / "missing.csv"), "-o", str(out)])
    assert failed.exit_code == 1 and out.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sts.tsv", "sts.yaml"]  # no temporary left
    # the written draft ingests its source: every row clean but the `n/a` one (so --strict exits 3)
    ingested = runner.invoke(app, _ingest_args(tmp_path, tmp_path, tmp_path / "home"))
    assert ingested.exit_code == 3, ingested.output
    assert _clean_rows(tmp_path / "home", load_contract(out)) == {"train": _graded_rows()}

    nowhere = runner.invoke(app, ["contract", "infer", str(source), "-o", str(tmp_path / "no" / "x.yaml")])
    assert nowhere.exit_code == 2 and not (tmp_path / "no").exists()
