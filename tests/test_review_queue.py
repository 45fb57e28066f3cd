"""The review queue: its three parts, no pair twice across nights, the Label Studio task file.

The selection rule is checked on a frame of known scores; the scoring run's `write-review-queue` step
is checked end to end with real tiny models (a champion folder and a challenger folder), real inbox
batches and the files it writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import test_scoring_support as support
from test_scoring_support import make_pairs, write_batch

from simpair.nightly.profile import NightlyProfile
from simpair.review.queue import QUEUE_COLUMNS, ReviewPolicy, review_key, review_keys, select_for_review
from simpair.review.store import SeenStore
from simpair.scoring import score_inbox

tiny_cross = support.tiny_cross


def _traffic(n: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "text_a": [f"first text number {i}" for i in range(n)],
            "text_b": [f"second text number {i}" for i in range(n)],
            "score": rng.random(n).astype(np.float32),
            "pair_id": [f"p{i}" for i in range(n)],
        }
    )


def test_three_queues_follow_their_rules() -> None:
    traffic = _traffic(2000)
    challenger = np.random.default_rng(1).random(2000).astype(np.float32)
    policy = ReviewPolicy(uncertain=40, disputed=30, random=50, seed=7)
    queue = select_for_review(traffic, 0.3, policy, set(), challenger_scores=challenger, run_id="night-1")
    assert queue.columns == QUEUE_COLUMNS
    assert queue["pair_id"].n_unique() == queue.height == 120
    assert dict(queue.group_by("queue").len().iter_rows()) == {"random": 50, "uncertain": 40, "disputed": 30}

    # random: drawn before any score is looked at, so other scores give the very same sample
    shuffled = traffic.with_columns(pl.Series("score", np.random.default_rng(9).random(2000), pl.Float32))
    again = select_for_review(shuffled, 0.3, policy, set(), run_id="night-1")
    random_ids = set(queue.filter(pl.col("queue") == "random")["source_pair_id"])
    assert set(again.filter(pl.col("queue") == "random")["source_pair_id"]) == random_ids
    # ... and another night draws another sample
    other_night = select_for_review(traffic, 0.3, policy, set(), run_id="night-2")
    assert set(other_night.filter(pl.col("queue") == "random")["source_pair_id"]) != random_ids

    # uncertain: no pair left out (and not drawn at random) lies nearer the threshold
    uncertain = queue.filter(pl.col("queue") == "uncertain")
    left = traffic.filter(~pl.col("pair_id").is_in(queue["source_pair_id"].implode()))
    assert (uncertain["score"] - 0.3).abs().max() <= (left["score"] - 0.3).abs().min()
    assert uncertain["rank"].to_list() == list(range(40))

    # disputed: the champion and the challenger fall on different sides of the threshold
    disputed = queue.filter(pl.col("queue") == "disputed")
    assert ((disputed["score"] >= 0.3) != (disputed["challenger_score"] >= 0.3)).all()
    gaps = (disputed["score"] - disputed["challenger_score"]).abs()
    assert gaps.to_list() == sorted(gaps.to_list(), reverse=True)

    # a band (a cascade's) keeps the uncertain queue inside it; no challenger, no disputed queue
    banded = select_for_review(traffic, 0.3, policy, set(), band=(0.4, 0.9), run_id="night-1")
    assert banded.filter(pl.col("queue") == "uncertain")["score"].min() >= 0.4
    assert "disputed" not in set(banded["queue"])


def test_seen_pairs_and_repeats_are_never_queued_again() -> None:
    traffic = _traffic(300)
    # the same pair again, swapped and with untidy whitespace: the same review key
    repeat = pl.DataFrame(
        {
            "text_a": ["second  text number 5 "],
            "text_b": ["first text number 5"],
            "score": [0.5],
            "pair_id": ["x"],
        }
    )
    traffic = pl.concat([traffic, repeat.cast(traffic.schema)])  # type: ignore[arg-type]
    assert review_key("second  text number 5 ", "first text number 5") == review_key(
        "first text number 5", "second text number 5"
    )
    policy = ReviewPolicy(uncertain=100, disputed=0, random=100)
    first = select_for_review(traffic, 0.5, policy, set(), run_id="a")
    assert first["pair_id"].n_unique() == first.height == 200
    second = select_for_review(traffic, 0.5, policy, set(first["pair_id"]), run_id="b")
    assert second.height == 100 and not set(second["pair_id"]) & set(first["pair_id"])
    third = select_for_review(
        traffic, 0.5, policy, set(first["pair_id"]) | set(second["pair_id"]), run_id="c"
    )
    assert third.height == 0  # every distinct pair (301 rows, 300 pairs) has been queued once
    assert review_keys(traffic["text_a"], traffic["text_b"]).n_unique() == 300


def test_profile_review_block() -> None:
    profile = NightlyProfile.model_validate(
        {"name": "p", "tasks": {}, "review": {"uncertain": 5, "disputed": 0, "random": 3, "seed": 4}}
    )
    assert profile.review == ReviewPolicy(uncertain=5, disputed=0, random=3, seed=4)
    with pytest.raises(ValueError, match="uncertian"):
        NightlyProfile.model_validate({"name": "p", "tasks": {}, "review": {"uncertian": 5}})


def test_scoring_run_writes_queue_and_label_studio_tasks(tmp_path: Path, tiny_cross: Path) -> None:
    from simpair.models import save_tiny_model

    challenger = save_tiny_model(tmp_path / "challenger", task="paraphrase", kind="cross", seed=5)
    inbox, out, home = tmp_path / "inbox", tmp_path / "out", tmp_path / "home"
    night1 = make_pairs(400, seed=11, prefix="n1")
    write_batch(night1, inbox / "night1.parquet")
    policy = ReviewPolicy(uncertain=20, disputed=10, random=15, challenger=str(challenger))
    first = score_inbox(str(inbox), out, str(tiny_cross), home, review=policy, chunk_rows=200)

    folder = out / "_review" / first.run_id
    queue = pl.read_parquet(folder / "queue.parquet")
    assert queue.columns == QUEUE_COLUMNS
    counts = dict(queue.group_by("queue").len().iter_rows())
    assert counts["uncertain"] == 20 and counts["random"] == 15 and 0 < counts.get("disputed", 0) <= 10
    assert set(queue["model"]) == {first.model_name} and set(queue["version"]) == {first.model_version}
    assert set(queue["run_id"]) == {first.run_id}
    assert set(queue["source_pair_id"]) <= set(night1.column("pair_id").to_pylist())

    tasks = json.loads((folder / "tasks.json").read_text())
    assert isinstance(tasks, list) and len(tasks) == queue.height
    assert set(tasks[0]) == {"data"}  # Label Studio's import format: one {"data": {...}} per task
    assert {"pair_id", "text_a", "text_b", "queue"} <= set(tasks[0]["data"])
    assert [t["data"]["pair_id"] for t in tasks] == queue["pair_id"].to_list()

    # the next night's traffic repeats some of tonight's pairs: none of those is queued again
    night2 = make_pairs(300, seed=12, prefix="n2")
    write_batch(
        pl.concat([pl.from_arrow(night1).head(200), pl.from_arrow(night2)]).to_arrow(), inbox / "n2.parquet"
    )
    second = score_inbox(str(inbox), out, str(tiny_cross), home, review=policy, chunk_rows=200)
    queue2 = pl.read_parquet(out / "_review" / second.run_id / "queue.parquet")
    assert queue2.height > 0 and not set(queue2["pair_id"]) & set(queue["pair_id"])
    assert SeenStore(out).keys() == set(queue["pair_id"]) | set(queue2["pair_id"])
    assert list(out.glob("date=*/_review")) == []  # readers of date=*/ never see the queue
