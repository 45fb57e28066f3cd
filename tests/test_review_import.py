"""`simpair review import`: Label Studio exports and pair_id,label files into the versioned reviews dataset.

Every test starts from a real queue on disk (the selection rule on a small traffic frame, written as
the scoring step writes it) and a home holding a toy evaluation dataset ingested through its own
contract, so the leakage check has an evaluation split to find review pairs in. Every import's records
must add up: reviews kept + rejected + quarantined.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from ingest_helpers import TOY_CONTRACT
from typer.testing import CliRunner

from simpair.catalog import Catalog
from simpair.cli import app
from simpair.contracts import contract_files, load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.review.imports import ReviewImportError, import_reviews
from simpair.review.labelstudio import write_tasks
from simpair.review.queue import ReviewPolicy, select_for_review

REPO = Path(__file__).resolve().parents[1]
LEAKED = ("the cat sat on the mat", "a cat was sitting on the mat")  # also a toy test pair


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, pl.DataFrame]:
    """(home with the toy dataset, scoring output holding one queue, that queue)."""
    home, sources, out = tmp_path / "home", tmp_path / "sources", tmp_path / "out"
    (sources / "toy").mkdir(parents=True)
    (sources / "toy" / "train.tsv").write_text("label\ta\tb\n1\tit rains\tit pours\n")
    (sources / "toy" / "test.tsv").write_text(f"label\ta\tb\n1\t{LEAKED[0]}\t{LEAKED[1]}\n0\tup\tdown\n")
    (tmp_path / "toy.yaml").write_text(TOY_CONTRACT)
    assert ingest_dataset(load_contract(tmp_path / "toy.yaml"), sources, home).status == "ingested"

    traffic = pl.DataFrame(
        {
            "text_a": [f"question number {i}" for i in range(60)] + [LEAKED[1]],
            "text_b": [f"another question {i}" for i in range(60)] + [LEAKED[0]],
            "score": [i / 61 for i in range(61)],
        }
    )
    policy = ReviewPolicy(uncertain=61, disputed=0, random=10)
    queue = select_for_review(traffic, 0.5, policy, set(), run_id="r1").with_columns(
        pl.lit("simpair-paraphrase").alias("model"), pl.lit("4").alias("version")
    )
    folder = out / "_review" / "r1"
    folder.mkdir(parents=True)
    queue.write_parquet(folder / "queue.parquet")
    write_tasks(queue, folder / "tasks.json")
    return home, out, queue


def _annotation(choice: str, who: int) -> dict:
    value = {"choices": [choice]}
    return {"result": [{"from_name": "paraphrase", "to_name": "text_a", "type": "choices", "value": value}],
            "was_cancelled": False, "completed_by": who}  # fmt: skip


def _export(queue_dir: Path, path: Path) -> Path:
    """A Label Studio JSON export of the queue's tasks: the shapes an export holds, one case each."""
    tasks = json.loads((queue_dir / "tasks.json").read_text())
    exported = []
    for i, task in enumerate(tasks):
        task = {"id": i + 1, **task}
        if i == 0:  # two reviewers who disagree
            task["annotations"] = [_annotation("Yes", 1), _annotation("No", 2)]
        elif i == 1:  # two reviewers who agree: one review, reviewers 2
            task["annotations"] = [_annotation("Yes", 1), _annotation("Yes", 2)]
        elif i == 2:  # skipped
            task["annotations"] = [{"result": [], "was_cancelled": True, "completed_by": 1}]
        elif i == 3:  # not yet annotated
            task["annotations"] = []
        elif i == 4:  # a pair id no queue holds
            task["data"] = {**task["data"], "pair_id": "0" * 40}
            task["annotations"] = [_annotation("No", 1)]
        else:
            task["annotations"] = [_annotation("Yes" if i % 2 else "No", 1 + i % 3)]
        exported.append(task)
    path.write_text(json.dumps(exported))
    return path


def test_label_studio_export_becomes_a_versioned_reviews_dataset(
    setup: tuple[Path, Path, pl.DataFrame], tmp_path: Path
) -> None:
    home, out, queue = setup
    export = _export(out / "_review" / "r1", tmp_path / "export.json")
    report = import_reviews(export, home, queue=out)
    # 61 tasks (10 random first, then 51 uncertain); tasks 1 and 2 have two annotations: 63 records
    assert report.records == 63 and report.balanced
    assert report.rejected == {
        "conflicting_review": 2, "duplicate_review": 1, "skipped_by_reviewer": 1, "not_reviewed": 1,
        "unknown_pair_id": 1,
    }  # fmt: skip
    assert report.reviews == 63 - 6 and report.quarantined == {}
    assert report.reviews_by_queue == {"uncertain": 51, "random": 6}

    catalog = Catalog(home)
    assert catalog.current_version("reviews") == report.version
    train, traffic = catalog.read_split("reviews", "train"), catalog.read_split("reviews", "traffic")
    assert set(train["queue"]) == {"uncertain"} and set(traffic["queue"]) == {"random"}
    assert train.height + traffic.height == 57
    agreed = pl.concat([train, traffic]).filter(pl.col("reviewers") == 2)
    assert agreed.height == 1 and agreed["label"].to_list() == [1] and agreed["reviewer"].to_list() == ["1,2"]
    assert set(train["model"]) == {"simpair-paraphrase"}
    assert set(train["pair_id"]) | set(traffic["pair_id"]) <= set(queue["pair_id"])
    rejected = pl.read_parquet(report.rejected_path)
    assert rejected.height == 6 and rejected["reason"].null_count() == 0
    assert "reviewers disagree" in rejected.filter(pl.col("reason") == "conflicting_review")["detail"][0]
    # the reviewed pair that is also a toy test pair (swapped) is found by ingest's leakage report
    leaked_key = queue.filter(pl.col("text_a") == LEAKED[1])["pair_id"][0]
    assert leaked_key in set(train["pair_id"])
    leaks = catalog.leakage().filter(pl.col("train_dataset") == "reviews")
    assert leaks.select("dataset", "split", "train_pair_id").rows() == [("toy", "test", leaked_key)]
    assert report.leakage == {"train_pairs_in_evaluation_splits": 1, "traffic_pairs_in_training_splits": 0}

    # the same export again: nothing new, the same version
    again = import_reviews(export, home, queue=out)
    assert again.status == "unchanged" and again.version == report.version and again.balanced


def test_csv_against_the_queue_and_a_later_contradicting_import(
    setup: tuple[Path, Path, pl.DataFrame], tmp_path: Path
) -> None:
    home, out, queue = setup
    ids = queue["pair_id"].to_list()
    rows = ["pair_id,label,reviewer", f"{ids[0]},yes,ann", f"{ids[1]},0,ann", f"{ids[2]},maybe,ann",
            f"{ids[3]},1,ann", f"{ids[3]},0,bob", "not-a-queued-pair,1,ann"]  # fmt: skip
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(ReviewImportError, match="needs --queue"):
        import_reviews(tmp_path / "labels.csv", home)
    first = import_reviews(tmp_path / "labels.csv", home, queue=out / "_review" / "r1")
    assert first.records == 6 and first.balanced and first.reviews == 2
    assert first.rejected == {"bad_label": 1, "conflicting_review": 2, "unknown_pair_id": 1}
    rejected = pl.read_parquet(first.rejected_path).sort("source_line")
    assert rejected["source_line"].to_list() == [4, 5, 6, 7]  # lines of the CSV (header is line 1)

    # a later file that says otherwise about a reviewed pair: ingest quarantines both copies
    pl.DataFrame({"pair_id": [ids[0], ids[4]], "label": ["0", "1"]}).write_parquet(tmp_path / "later.parquet")
    later = import_reviews(tmp_path / "later.parquet", home, queue=out)
    assert later.records == 2 and later.balanced
    assert later.reviews == 1 and later.quarantined == {"conflicting_duplicate": 1}
    assert later.version != first.version
    quarantine = Catalog(home).quarantine("reviews")
    assert quarantine.filter(pl.col("reason") == "conflicting_duplicate").height == 2


def test_cli_imports_and_ingest_skips_the_review_contracts(
    setup: tuple[Path, Path, pl.DataFrame], tmp_path: Path
) -> None:
    home, out, queue = setup
    ratings = pl.DataFrame({"pair_id": queue["pair_id"].head(3), "label": ["4", "4.5", "9"]})
    ratings.write_csv(tmp_path / "ratings.csv")
    result = CliRunner().invoke(
        app,
        ["review", "import", str(tmp_path / "ratings.csv"), "--queue", str(out), "--home", str(home),
         "--json", str(tmp_path / "r.json"), "--strict"],
    )  # fmt: skip
    assert result.exit_code == 3, result.output  # --strict: a rejected record
    said = json.loads((tmp_path / "r.json").read_text())
    assert said["task"] == "sts" and said["dataset"] == "reviews-sts" and said["balanced"]
    assert said["reviews"] == 2 and said["rejected"] == {"bad_label": 1}
    traffic = Catalog(home).read_split(
        "reviews-sts", "traffic"
    )  # the queue's first pairs are its random ones
    assert traffic["score"].to_list() == pytest.approx([0.8, 0.9]) and traffic["score_raw"].to_list() == [
        4,
        4.5,
    ]
    assert "3 records -> 2 reviews" in result.output

    missing = CliRunner().invoke(app, ["review", "import", str(tmp_path / "nope.json"), "--home", str(home)])
    assert missing.exit_code == 1 and "error:" in missing.output and "nope.json" in missing.output
    # the review contracts are not raw sources: `simpair ingest` leaves them alone
    assert [p.name for p in contract_files(REPO / "data_contracts")] == ["msrp.yaml", "stsb.yaml"]
