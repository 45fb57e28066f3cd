"""Scoring without Prefect: row rejects, file quarantine, exactly-once re-runs, changed files, the lock.

Every test scores with a real saved tiny model (`save_tiny_model`) and checks the Parquet output row
by row against the input and against the predictor called directly.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import test_scoring_support as support
from test_scoring_support import (
    assert_exactly_once,
    corrupt_row_group,
    make_pairs,
    read_outputs,
    read_rejects,
    write_batch,
)

from simpair.runtime.loader import load_predictor
from simpair.scoring import score_inbox
from simpair.scoring.chunk import ChunkResult
from simpair.scoring.contract import load_contract
from simpair.scoring.ledger import Ledger
from simpair.scoring.lock import RunLocked, run_lock
from simpair.scoring.reader import inspect_file, read_chunk
from simpair.scoring.scorer import truncation_flags

tiny_cross = support.tiny_cross
tiny_bi = support.tiny_bi


def test_scores_match_predictor_row_by_row_and_rerun_skips(tmp_path: Path, tiny_cross: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(2500, seed=1)
    write_batch(table, inbox / "night1.parquet", row_group_size=700)  # chunks straddle row groups

    first = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=1000)
    assert (first.files_scored, first.rows_scored, first.rows_rejected) == (1, 2500, 0)
    assert first.pairs_per_s > 0
    output = read_outputs(out)
    assert_exactly_once(table, output)

    expected = load_predictor(tiny_cross).predict(
        table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    )
    np.testing.assert_allclose(output.column("score").to_numpy(), expected["score"], atol=1e-5)
    np.testing.assert_allclose(output.column("probability").to_numpy(), expected["probability"], atol=1e-5)
    assert output.column("label").to_pylist() == expected["label"].tolist()
    assert set(output.column("model_version").to_pylist()) == {first.model_version}
    assert set(output.column("run_id").to_pylist()) == {first.run_id}
    assert output.schema.field("scored_at").type == pa.timestamp("us", tz="UTC")
    [path] = list(out.glob("date=*/night1-*.parquet"))
    assert path.parent.name.startswith("date=20")

    second = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=1000)
    assert (second.files_scored, second.files_skipped, second.rows_scored_this_run) == (0, 1, 0)
    assert_exactly_once(table, read_outputs(out))  # nothing written twice


def test_changed_file_same_name_is_new_work(tmp_path: Path, tiny_cross: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    old, new = make_pairs(300, seed=2, prefix="old"), make_pairs(400, seed=3, prefix="new")
    write_batch(old, inbox / "batch.parquet")
    score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=128)
    write_batch(new, inbox / "batch.parquet")  # rewritten under the same name
    summary = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=128)
    assert (summary.files_scored, summary.rows_scored) == (1, 400)
    outputs = sorted(out.glob("date=*/batch-*.parquet"))
    assert len(outputs) == 2  # the old output is kept, the new one is a separate file
    ids = {pid[:3] for f in outputs for pid in pq.read_table(f).column("pair_id").to_pylist()}
    assert ids == {"old", "new"}
    assert {r.status for r in Ledger(out).files()} == {"done"}


def test_bad_rows_go_to_rejects_and_long_texts_are_cut_and_flagged(tmp_path: Path, tiny_cross: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    n = 40
    text_a = [f"sentence number {i}" for i in range(n)]
    raw_b: list[bytes | None] = [f"another one {i}".encode() for i in range(n)]
    raw_b[3] = None  # null
    raw_b[5] = b"   "  # blank
    raw_b[8] = b"caf\xe9 latin-1"  # not UTF-8
    text_a[11] = ""  # empty
    text_a[13] = "word " * 3000  # 15,000 chars: cut to max_chars and flagged
    text_a[14] = "long " * 200  # 1,000 chars: under max_chars but over 128 tokens: flagged by the model
    table = pa.table(
        {
            "pair_id": [f"r{i:03d}" for i in range(n)],
            "text_a": text_a,
            # a string column holding invalid UTF-8 bytes, as a careless writer can produce
            "text_b": pa.array(raw_b, pa.binary()).view(pa.string()),
            "score": pa.array([1.0] * n),  # collides with an output column: kept as input_score
        }
    )
    write_batch(table, inbox / "rows.parquet", row_group_size=16)
    summary = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=10)
    assert (summary.rows_scored, summary.rows_rejected, summary.files_quarantined) == (n - 4, 4, 0)

    rejects = read_rejects(out)
    assert rejects is not None
    got = {(r["row_index"], r["reason"], r["field"]) for r in rejects.to_pylist()}
    assert got == {(3, "null_text", "text_b"), (5, "blank_text", "text_b"), (8, "non_utf8", "text_b"),
                   (11, "blank_text", "text_a")}  # fmt: skip
    bad = next(r for r in rejects.to_pylist() if r["row_index"] == 8)
    assert (
        bad["text_b"] == "caf\\xe9 latin-1"
        and bad["pair_id"] == "r008"
        and bad["source_file"] == "rows.parquet"
    )

    output = read_outputs(out)
    keep = [i for i in range(n) if i not in {3, 5, 8, 11}]
    assert output.column("pair_id").to_pylist() == [f"r{i:03d}" for i in keep]
    assert output.column("input_score").to_pylist() == [1.0] * len(keep)
    flagged = dict(
        zip(output.column("pair_id").to_pylist(), output.column("truncated").to_pylist(), strict=True)
    )
    assert flagged["r013"] and flagged["r014"] and not flagged["r000"]
    assert output.column("text_a").to_pylist()[keep.index(13)] == text_a[13]  # passthrough is untouched


def test_bad_files_are_quarantined_next_to_good_ones(tmp_path: Path, tiny_cross: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    good = make_pairs(600, seed=4)
    write_batch(good, inbox / "a-good.parquet")
    (inbox / "b-not-parquet.parquet").write_text("text_a,text_b\nhello,world\n")
    (inbox / "c-notes.csv").write_text("text_a,text_b\nx,y\n")
    write_batch(pa.table({"question1": ["a"], "question2": ["b"]}), inbox / "d-wrong-columns.parquet")
    write_batch(pa.table({"text_a": [1, 2], "text_b": ["x", "y"]}), inbox / "e-int-text.parquet")
    write_batch(make_pairs(0), inbox / "f-empty.parquet")
    write_batch(make_pairs(1000, seed=5, prefix="c"), inbox / "g-corrupt.parquet", row_group_size=200)
    corrupt_row_group(inbox / "g-corrupt.parquet", 3)
    (inbox / "_incoming.parquet.tmp").write_text("half-uploaded")  # ignored: underscore prefix

    summary = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=200)
    status = {f["file"]: (f["status"], f["detail"]) for f in summary.files}
    assert status["a-good.parquet"][0] == "scored"
    assert (
        status["b-not-parquet.parquet"][0] == "quarantined"
        and "unreadable" in status["b-not-parquet.parquet"][1]
    )
    assert status["c-notes.csv"][0] == "quarantined"
    assert "missing required column 'text_a'" in status["d-wrong-columns.parquet"][1]
    assert "has type int64" in status["e-int-text.parquet"][1]
    assert "zero rows" in status["f-empty.parquet"][1]
    assert status["g-corrupt.parquet"][0] == "quarantined" and "corrupt" in status["g-corrupt.parquet"][1]
    assert "_incoming.parquet.tmp" not in status
    assert (summary.files_scored, summary.files_quarantined) == (1, 6)
    assert_exactly_once(good, read_outputs(out))  # nothing of the corrupt file leaked into the output
    assert not list((out / "_staging").glob("*/*"))

    again = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=1000)
    assert {f["status"] for f in again.files} == {"done_before", "quarantined_before"}  # not retried

    fixed = make_pairs(50, seed=6, prefix="fixed")
    write_batch(fixed, inbox / "e-int-text.parquet")  # the sender fixes the file: new bytes, new try
    third = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=1000)
    assert {f["file"]: f["status"] for f in third.files}["e-int-text.parquet"] == "scored"


def test_same_bytes_under_two_names_scored_once(tmp_path: Path, tiny_cross: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(100, seed=7)
    write_batch(table, inbox / "x.parquet")
    (inbox / "copy-of-x.parquet").write_bytes((inbox / "x.parquet").read_bytes())
    summary = score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home")
    assert {f["file"]: f["status"] for f in summary.files} == {
        "copy-of-x.parquet": "scored",
        "x.parquet": "duplicate",
    }
    assert_exactly_once(table, read_outputs(out))


def test_bi_encoder_sts_model_and_file_url_inbox(tmp_path: Path, tiny_bi: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(700, seed=8)
    write_batch(table, inbox / "sub" / "nested.parquet")
    summary = score_inbox(f"file://{inbox}", out, str(tiny_bi), tmp_path / "home", chunk_rows=300)
    output = read_outputs(out)
    assert_exactly_once(table, output)
    assert summary.files[0]["file"] == "sub/nested.parquet"
    expected = load_predictor(tiny_bi).predict(
        table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    )
    np.testing.assert_allclose(output.column("score").to_numpy(), expected["score"], atol=1e-5)
    assert output.column("label").null_count == len(output)  # graded model: no label/probability
    assert output.column("probability").null_count == len(output)


def test_read_chunk_streams_only_overlapping_row_groups(tmp_path: Path) -> None:
    table = make_pairs(1000, seed=9)
    path = write_batch(table, tmp_path / "f.parquet", row_group_size=97)
    layout = inspect_file(str(path), load_contract())
    assert layout.n_rows == 1000 and len(layout.row_group_starts) == 11
    for start, stop in [(0, 97), (90, 300), (999, 1000), (500, 1000)]:
        assert read_chunk(str(path), layout, start, stop).equals(table.slice(start, stop - start))


def test_second_run_exits_with_message_while_first_holds_lock(tmp_path: Path, tiny_cross: Path) -> None:
    """A real run, paused between chunks by its callback, holds the lock; a second run is refused."""
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(600, seed=10)
    write_batch(table, inbox / "b.parquet")
    paused, release = threading.Event(), threading.Event()

    def hold(_result: object) -> None:
        paused.set()
        release.wait(60)

    results: dict[str, object] = {}
    first = threading.Thread(
        target=lambda: results.update(
            first=score_inbox(
                str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=200, on_chunk_done=hold
            )
        )
    )
    first.start()
    assert paused.wait(60)
    with pytest.raises(RunLocked, match="another scoring run holds"):
        score_inbox(str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=200)
    release.set()
    first.join(60)
    with run_lock(out, wait_seconds=5):  # released when the run ended
        pass
    assert_exactly_once(table, read_outputs(out))


def test_truncation_prefilter_agrees_with_predictor(tiny_cross: Path, tiny_bi: Path) -> None:
    words = make_pairs(300, seed=14)
    text_a = [t * (1 + i % 9) for i, t in enumerate(words.column("text_a").to_pylist())]  # short to very long
    text_b = words.column("text_b").to_pylist()
    for model in (tiny_cross, tiny_bi):
        predictor = load_predictor(model)
        want = predictor.truncated(text_a, text_b)
        assert want.any() and not want.all()
        assert truncation_flags(predictor, text_a, text_b).tolist() == want.tolist()


def test_resume_with_another_model_rescores_its_chunks(tmp_path: Path, tiny_cross: Path) -> None:
    """A run dies mid-file (its callback raises); the next run pins another model: no mixed versions."""
    from simpair.models import save_tiny_model

    other = save_tiny_model(tmp_path / "other-model", task="paraphrase", kind="cross", seed=3)
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(1000, seed=15)
    write_batch(table, inbox / "b.parquet")

    def die_after_two(result: ChunkResult) -> None:
        if result.idx == 1:
            raise KeyboardInterrupt("operator pressed ctrl-c")

    with pytest.raises(KeyboardInterrupt):
        score_inbox(
            str(inbox), out, str(tiny_cross), tmp_path / "home", chunk_rows=250, on_chunk_done=die_after_two
        )
    assert len(Ledger(out).chunks(Ledger(out).files()[0].sha256)) == 2
    summary = score_inbox(str(inbox), out, str(other), tmp_path / "home", chunk_rows=250)
    assert summary.rows_scored_this_run == 1000  # the two chunks of the first model were redone
    output = read_outputs(out)
    assert_exactly_once(table, output)
    assert set(output.column("model_name").to_pylist()) == {"other-model"}


def test_onnx_backend_gives_the_same_scores_as_torch(tmp_path: Path, tiny_cross: Path, tiny_bi: Path) -> None:
    table = make_pairs(600, seed=16)
    write_batch(table, tmp_path / "inbox" / "b.parquet")
    for model in (tiny_cross, tiny_bi):
        outputs = {}
        for backend in ("torch", "onnx"):
            out = tmp_path / f"out-{model.name}-{backend}"
            score_inbox(
                str(tmp_path / "inbox"), out, str(model), tmp_path / "home", chunk_rows=256, backend=backend
            )
            outputs[backend] = read_outputs(out)
        assert_exactly_once(table, outputs["onnx"])
        np.testing.assert_allclose(
            outputs["onnx"].column("score").to_numpy(), outputs["torch"].column("score").to_numpy(), atol=1e-5
        )
