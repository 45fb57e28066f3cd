"""Bad inputs a team meets in its first month, each ending in one clear line or a reviewed draft.

Encoding (a UTF-8 export with one broken byte), a current version with an empty split, copies of a
pair whose labels disagree, a contract naming one column twice, two files that differ only by their
compression suffix, a sample whose text columns have name-similar siblings, and a sample inbox asked
of a home where nothing was ingested.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
from test_ingest_contract_features import AB, binary_contract, ingest

from simpair.catalog import Catalog
from simpair.contracts import ContractError, load_contract
from simpair.ingest import run_ingest
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.dedupe import find_duplicates
from simpair.ingest.infer import infer_contract

SIMPAIR = str(Path(sys.executable).with_name("simpair"))
ENV = {**os.environ, "COLUMNS": "300", "SIMPAIR_DEBUG": ""}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIMPAIR, *args], capture_output=True, text=True, timeout=120, env=ENV)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


# ---- encoding ------------------------------------------------------------------------------------


def _utf8_with_one_bad_byte(rows: int = 40, bad_line: int = 8) -> bytes:
    """A UTF-8 TSV full of curly quotes and accents; line `bad_line` carries one latin-1 byte."""
    lines = ["id\tsentence1\tsentence2\tlabel"]
    for i in range(rows):
        lines.append(
            f"{i}\t\u201cCaf\u00e9 number {i}\u201d, said the man.\t"
            f"The man said \u201cit is caf\u00e9 {i}\u201d.\t{i % 2}"
        )
    raw = [line.encode() for line in lines]
    raw[bad_line - 1] = raw[bad_line - 1].replace("é".encode(), b"\xe9", 1)
    return b"\n".join(raw) + b"\n"


def test_infer_keeps_utf8_for_a_utf8_file_with_one_bad_byte_and_ingest_quarantines_that_line(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "mixed.tsv").write_bytes(_utf8_with_one_bad_byte())
    draft = infer_contract(src / "mixed.tsv")  # today: refused as "looks binary" (C1 controls in latin-1)
    assert draft.contract["format"]["encoding"] == "utf-8"
    text = draft.to_yaml()
    assert "line 8 is not valid UTF-8" in " ".join(text.split())
    assert "reason encoding" in text
    # the reviewed draft ingests: the one bad line is quarantined as `encoding`, every accent intact
    (tmp_path / "mixed.yaml").write_text(text)
    report = ingest_dataset(load_contract(tmp_path / "mixed.yaml"), src, tmp_path / "home")
    assert report.status == "ingested", report.error
    catalog = Catalog(tmp_path / "home")
    quarantine = catalog.quarantine("mixed")
    assert quarantine.select("source_line", "reason").rows() == [(8, "encoding")]
    train = catalog.read_split("mixed", "train")
    assert train.height == 39 and train["text_a"].str.contains("Café").all()
    assert train["text_a"].str.starts_with("\u201c").all()


# ---- empty splits and failures that name their file ---------------------------------------------


def _write_contracts(folder: Path, **contracts: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in contracts.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


def test_an_empty_current_split_does_not_break_later_ingests(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.tsv").write_bytes(b"label\ta\tb\n1\tA cat sits.\tA cat is sitting.\n0\tRain.\tSun.\n")
    (src / "test.tsv").write_bytes(b"label\ta\tb\n7\tQ.\tR.\n")  # its only row is quarantined
    files = [{"split": "train", "pattern": "train.tsv"}, {"split": "test", "pattern": "test.tsv"}]
    contracts = _write_contracts(
        tmp_path / "contracts", toy=binary_contract(files, AB, checks={"min_clean_rows": 0})
    )
    first = run_ingest(src, tmp_path / "home", contracts)
    assert first.ok and Catalog(tmp_path / "home").read_split("toy", "test").height == 0
    # an empty split written by earlier ingest code carries Null-typed columns: still no SchemaError
    empty = Catalog(tmp_path / "home").split_path("toy", "test")
    pl.DataFrame({c: pl.Series([], dtype=pl.Null) for c in ("pair_id", "text_a", "text_b")}).write_parquet(
        empty
    )
    (src / "train.tsv").write_bytes(b"label\ta\tb\n1\tA cat sits.\tA cat is sitting.\n0\tX.\tY.\n")
    other = binary_contract(files, AB, checks={"min_clean_rows": 0}).replace("dataset: toy", "dataset: other")
    _write_contracts(contracts, other=other)
    later = run_ingest(src, tmp_path / "home", contracts)
    assert later.ok, later.failure_lines()
    assert later.leakage is not None and later.leakage.status == "computed"


def test_an_unreadable_split_fails_the_leakage_report_with_one_line_naming_the_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "t.tsv").write_bytes(b"label\ta\tb\n1\tA cat sits.\tA cat is sitting.\n")
    contract = binary_contract([{"split": "train", "pattern": "t.tsv"}], AB)
    contracts = _write_contracts(tmp_path / "contracts", toy=contract)
    home = tmp_path / "home"
    assert run_ingest(src, home, contracts).ok
    broken = Catalog(home).split_path("toy", "train")
    broken.write_bytes(b"not parquet at all" * 10)
    _write_contracts(contracts, other=contract.replace("dataset: toy", "dataset: other"))
    done = _cli("ingest", "--no-prefect", "--sources", str(src), "--home", str(home),
                "--contracts", str(contracts))  # fmt: skip
    # today: a bare ArrowInvalid line naming no file, and no table on stdout
    assert done.returncode == 1
    assert "other" in done.stdout and "the leakage report failed" in done.stdout
    errors = _errors(done.stderr)
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("error: leakage report: ") and str(broken) in errors[0]


# ---- conflicting duplicates ----------------------------------------------------------------------

GRADED = """\
dataset: sick
contract_version: "1"
format: {delimiter: "\\t", quoting: none, header: true, field_counts: [3]}
files: [{split: train, pattern: t.tsv}]
columns: {label: score, text_a: a, text_b: b}
label: {kind: graded, range: [1, 5]}
"""
# lines 2-9: a pair with an exact copy of another score, a swapped copy of another score, a plain
# repeat with the same score, and two rows with nothing repeated
CONFLICTS = (
    b"score\ta\tb\n"
    b"3.7\tA man plays.\tA guy plays.\n"  # 2: first copy
    b"4.4\tA man plays.\tA guy plays.\n"  # 3: exact copy, another score
    b"2.0\tKids run.\tChildren run.\n"  # 4: first copy
    b"3.0\tChildren run.\tKids run.\n"  # 5: swapped copy, another score
    b"1.0\tRain.\tSun.\n"  # 6
    b"1.0\tRain.\tSun.\n"  # 7: plain repeat, same score
    b"5.0\tA dog.\tA puppy.\n"  # 8
    b"2.5\tA cat.\tA car.\n"  # 9
)


def _graded(rule: str | None) -> str:
    return GRADED if rule is None else GRADED + f"duplicates: {{conflicting_labels: {rule}}}\n"


def test_conflicting_copies_are_all_quarantined_by_default_and_counted(tmp_path: Path) -> None:
    report, catalog = ingest(tmp_path, _graded(None), {"t.tsv": CONFLICTS})
    assert report.status == "ingested", report.error
    train = report.splits[0]
    assert train.reasons == {"conflicting_duplicate": 4, "duplicate": 1}
    assert train.label_conflicts == 2 and train.clean == 3
    quarantine = catalog.quarantine("sick").sort("source_line")
    assert quarantine.select("source_line", "reason").rows() == [
        (2, "conflicting_duplicate"), (3, "conflicting_duplicate"), (4, "conflicting_duplicate"),
        (5, "conflicting_duplicate"), (7, "duplicate"),
    ]  # fmt: skip
    assert (
        "2 copies of this pair carry different labels (3.7, 4.4); first copy at line 2"
        in (quarantine["detail"][1])
    )
    assert sorted(catalog.read_split("sick", "train")["source_line"].to_list()) == [6, 8, 9]


def test_keep_first_keeps_the_first_copy_and_says_the_labels_differed(tmp_path: Path) -> None:
    report, catalog = ingest(tmp_path, _graded("keep_first"), {"t.tsv": CONFLICTS})
    train = report.splits[0]
    assert train.reasons == {"duplicate": 3} and train.label_conflicts == 2
    details = catalog.quarantine("sick").sort("source_line")["detail"].to_list()
    first_kept = "as line 2; its label 4.4 differs from the first copy's 3.7 (first copy kept)"
    assert details[0].endswith(first_kept)
    assert details[2].endswith("same text_a/text_b as line 6")
    kept = catalog.read_split("sick", "train").sort("source_line")
    assert kept["score_raw"].to_list()[:2] == [3.7, 2.0]


def test_mean_gives_the_first_copy_the_mean_score(tmp_path: Path) -> None:
    report, catalog = ingest(tmp_path, _graded("mean"), {"t.tsv": CONFLICTS})
    assert report.splits[0].label_conflicts == 2
    kept = catalog.read_split("sick", "train").sort("source_line")
    assert kept["source_line"].to_list() == [2, 4, 6, 8, 9]
    assert kept["score_raw"].to_list()[:3] == pytest.approx([4.05, 2.5, 1.0])
    assert kept["score"].to_list()[:2] == pytest.approx([(4.05 - 1) / 4, (2.5 - 1) / 4])


def test_mean_of_binary_labels_is_a_contract_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(binary_contract([{"split": "train", "pattern": "t.tsv"}], AB,
                                    duplicates={"conflicting_labels": "mean"}))  # fmt: skip
    with pytest.raises(ContractError, match="duplicates.conflicting_labels: mean needs a graded label"):
        load_contract(path)


def test_conflicts_are_found_out_of_core_across_buckets(tmp_path: Path) -> None:
    """Many tiny buckets (the spill path) decide exactly what one in-memory bucket decides."""
    rows = [(i, f"s{i % 17}", f"t{i % 13}", float(i % 3)) for i in range(2, 400)]
    frame = pl.DataFrame(rows, schema=["line", "text_a", "text_b", "score_raw"], orient="row").with_columns(
        pl.lit(0, dtype=pl.Int32).alias("file_index"), pl.lit("train").alias("split"),
        pl.format("p{}", "line").alias("pair_id"), pl.lit("t.tsv").alias("source_file"),
        (pl.col("score_raw") / 2).alias("score"),
    )  # fmt: skip
    (tmp_path / "parts").mkdir()
    parts = []
    for i, start in enumerate(range(0, frame.height, 50)):
        parts.append(tmp_path / "parts" / f"part-{i}.parquet")
        frame.slice(start, 50).write_parquet(parts[-1])
    contract = load_contract(_contract_file(tmp_path, _graded("mean")))

    def decided(bucket_rows: int) -> tuple[list[tuple], list[tuple], dict[str, int]]:
        found = find_duplicates(parts, contract, tmp_path / f"work-{bucket_rows}", bucket_rows)
        rejects = pl.read_parquet(found.rejects).sort("file_index", "line").rows()
        return rejects, sorted(found.label_updates.rows()), found.conflicts

    small, whole = decided(3), decided(1_000_000)
    assert small == whole
    assert whole[2]["train"] > 10 and len(whole[1]) == whole[2]["train"]


def _contract_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(textwrap.dedent(text))
    return path


# ---- contract errors and source failures: one stderr line each ----------------------------------


def test_a_contract_naming_one_column_twice_prints_one_stderr_line(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    contract = binary_contract([{"split": "train", "pattern": "t.tsv"}], {**AB, "text_b": "a"})
    contracts = _write_contracts(tmp_path / "contracts", toy=contract)
    done = _cli("ingest", "--no-prefect", "--sources", str(tmp_path / "src"), "--home",
                str(tmp_path / "home"), "--contracts", str(contracts))  # fmt: skip
    assert done.returncode == 1
    errors = _errors(done.stderr)  # today: nothing on stderr, the reason wrapped inside the table
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"error: toy: {contracts / 'toy.yaml'}: invalid contract: columns: ")
    assert "text_a and text_b both map to column 'a'" in errors[0] and "Value error" not in errors[0]


def test_a_failed_source_prints_one_line_naming_the_file_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "t.tsv").write_bytes(b"label\ta\tb\n")
    contracts = _write_contracts(
        tmp_path / "contracts", toy=binary_contract([{"split": "train", "pattern": "t.tsv"}], AB)
    )
    done = _cli("ingest", "--no-prefect", "--sources", str(tmp_path / "src"), "--home",
                str(tmp_path / "home"), "--contracts", str(contracts))  # fmt: skip
    assert done.returncode == 1
    errors = _errors(done.stderr)
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("error: toy: ") and str(tmp_path / "src" / "t.tsv") in errors[0]


# ---- pair-id tags --------------------------------------------------------------------------------


def test_files_differing_only_by_compression_get_their_own_pair_id_tags(tmp_path: Path) -> None:
    plain = b"label\ta\tb\n1\tA cat sits.\tA cat is sitting.\n0\tIt rains.\tThe sun shines.\n"
    packed = gzip.compress(b"label\ta\tb\n1\tA dog runs.\tA dog is running.\n0\tHot.\tCold.\n")
    other = b"label\ta\tb\n1\tA cow eats.\tA cow is eating.\n"
    contract = binary_contract([{"split": "train", "pattern": "*/*.tsv*"}], AB)
    files = {"a/x.tsv": plain, "a/x.tsv.gz": packed, "b/y.tsv.gz": gzip.compress(other)}
    report, catalog = ingest(tmp_path, contract, files)
    train = report.splits[0]
    assert (train.clean, train.quarantined) == (5, 0), train.reasons  # today: 2 duplicate_pair_id
    ids = sorted(catalog.read_split("toy", "train")["pair_id"].to_list())
    # the colliding files keep their compression suffix; a file whose stem is unique keeps its old tag
    assert ids == ["train-a/x-2", "train-a/x-3", "train-a/x.gz-2", "train-a/x.gz-3", "train-y-2"]


# ---- text columns with name-similar siblings -----------------------------------------------------


def _sick_sample(rows: int = 300, plain_mostly_empty: bool = False) -> str:
    """SICK's layout: normalised sentence_A/B beside longer sentence_A/B_original."""
    head = ["pair_ID", "sentence_A", "sentence_B", "entailment_label", "relatedness_score",
            "sentence_A_original", "sentence_B_original", "sentence_A_dataset", "SemEval_set"]  # fmt: skip
    subjects = ["A man", "A woman", "The dog", "A child", "Two people", "A group of kids", "The boy"]
    verbs = ["is playing", "is riding", "is cutting", "is eating", "is walking", "is jumping"]
    objects = ["a guitar", "a horse", "an onion", "a banana", "in the park", "over a fence"]
    tails = [" on a sunny afternoon near the river", " while people are watching", " in front of a crowd"]
    lines = ["\t".join(head)]
    for i in range(1, rows + 1):
        a = f"{subjects[i % 7]} {verbs[i % 6]} {objects[i % 5]}"
        b = f"{subjects[(i * 3) % 7]} {verbs[(i * 5) % 6]} {objects[(i * 2) % 6]}"
        a_orig, b_orig = a + tails[i % 3] + ".", b + tails[(i + 1) % 3] + "."
        if plain_mostly_empty and i % 3:
            a = b = ""
        label = ["NEUTRAL", "ENTAILMENT", "CONTRADICTION"][i % 3]
        score = f"{1 + (i * 7) % 40 / 10:.1f}"
        split = ["TRAIN", "TEST", "TRIAL"][i % 3]
        lines.append("\t".join([str(i), a, b, label, score, a_orig, b_orig, "FLICKR", split]))
    return "\n".join(lines) + "\n"


def test_infer_prefers_the_plain_text_columns_over_their_longer_originals(tmp_path: Path) -> None:
    path = tmp_path / "sick.tsv"
    path.write_text(_sick_sample())
    draft = infer_contract(path)
    columns = draft.contract["columns"]
    assert (columns["text_a"], columns["text_b"]) == ("sentence_A", "sentence_B")  # today: the originals
    note = next(n for n in draft.notes if "other candidates are close" in n)
    assert "'sentence_A_original' (a name-similar sibling of 'sentence_A'" in note
    assert "'sentence_B_original'" in note and "FLICKR" not in note and "sentence_A_dataset" not in note


def test_infer_keeps_the_originals_when_the_sample_does_not_back_the_plain_columns(tmp_path: Path) -> None:
    path = tmp_path / "sick.tsv"
    path.write_text(_sick_sample(plain_mostly_empty=True))
    draft = infer_contract(path)
    columns = draft.contract["columns"]
    assert (columns["text_a"], columns["text_b"]) == ("sentence_A_original", "sentence_B_original")
    assert any("'sentence_A' (a name-similar sibling of 'sentence_A_original'" in n for n in draft.notes)


def test_infer_notes_two_text_columns_of_similar_length(tmp_path: Path) -> None:
    lines = ["question\tanswer\tparaphrase\tlabel"]
    lines += [f"How do I cook rice {i}?\tBoil it {i} min.\tWhat is the way to cook rice {i}?\t{i % 2}"
              for i in range(30)]  # fmt: skip
    path = tmp_path / "qa.tsv"
    path.write_text("\n".join(lines) + "\n")
    draft = infer_contract(path)
    assert (draft.contract["columns"]["text_a"], draft.contract["columns"]["text_b"]) == (
        "question", "paraphrase"
    )  # fmt: skip
    assert not any("other candidates are close" in n for n in draft.notes)  # 'answer' is much shorter
    lines = [line.replace("Boil it", "Boil it in water") for line in lines]
    path.write_text("\n".join(lines) + "\n")
    draft = infer_contract(path)
    note = next(n for n in draft.notes if "other candidates are close" in n)
    assert "a text column of similar length" in note


# ---- make-sample-inbox on a fresh home -----------------------------------------------------------


def test_make_sample_inbox_on_a_fresh_home_fails_with_one_line(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    done = _cli("make-sample-inbox", "--inbox", str(inbox), "--home", str(tmp_path / "fresh"))
    assert done.returncode != 0  # today: exit 0, nothing written, nothing said
    errors = _errors(done.stderr)
    assert len(errors) == 1 and "no ingested test split: run simpair ingest first" in errors[0]
    assert not inbox.exists()
