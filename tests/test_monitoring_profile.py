"""Profiles of traffic in bounded memory: merges equal one pass, real files, a real tiny model."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from simpair.models import save_tiny_model
from simpair.models.tokenizer import load_tokenizer
from simpair.monitoring.policy import MonitorPolicy
from simpair.monitoring.profile import (
    Histogram,
    Profile,
    ProfileBuilder,
    VectorSample,
    reference_profile,
)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "bi", task="paraphrase", kind="bi")


def test_histogram_merge_equals_one_pass_and_keeps_the_tails() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(20, 8, 5000), [-3.0, 5000.0, np.nan]])
    whole = Histogram.of("tokens").add(values)
    parts = [Histogram.of("tokens").add(v) for v in np.array_split(values, 7)]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    assert merged.counts == whole.counts
    assert whole.total == 5002  # NaN skipped, values outside the edges in the outer bins
    assert whole.counts[0] >= 1 and whole.counts[-1] == 1
    with pytest.raises(ValueError, match="different edges"):
        whole.merge(Histogram.of("score"))


def test_vector_sample_merge_equals_one_pass_for_any_chunking() -> None:
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(3000, 8)).astype(np.float32)
    whole = VectorSample(k=100, seed=3).add(rows)
    for cuts in ([500, 1700], [1, 2, 2999], list(range(250, 3000, 250))):
        merged = VectorSample(k=100, seed=3)
        for chunk in np.split(rows, cuts):
            merged = merged.merge(VectorSample(k=100, seed=3).add(chunk))
        np.testing.assert_array_equal(merged.array(), whole.array())
        assert merged.seen == 3000
    assert len(whole) == 100
    # uniform: the sample's mean index is near the middle (a reservoir biased to early rows would fail)
    index = {r.tobytes(): i for i, r in enumerate(rows)}
    picked = np.array([index[r.tobytes()] for r in whole.array()])
    assert 1100 < picked.mean() < 1900
    assert not np.array_equal(VectorSample(k=100, seed=4).add(rows).array(), whole.array())


def test_builder_counts_tokens_truncation_rare_pieces_and_positives(tmp_path: Path, tiny_dir: Path) -> None:
    tok = load_tokenizer(tiny_dir)
    builder = ProfileBuilder(
        tok, max_length=16, form="cross", threshold=0.5, kind="traffic", model="m", version="1"
    )
    long_text = " ".join(["word"] * 30)
    builder.add(
        ["a short text", long_text, "\u2603\u2603 zzqxj"],
        ["another short one", "short", "fine"],
        np.array([0.9, 0.2, 0.5]),
    )
    builder.set_health(rows_in=4, rejected=1, pairs_per_s=100.0)
    profile = builder.finish()
    assert profile.n_pairs == 3 and profile.positives == 2
    assert profile.histograms["tokens"].total == 6
    assert profile.histograms["truncated"].counts == [2, 1]  # only the 30-word pair is cut at 16
    rare = profile.histograms["rare"]
    assert rare.counts[0] == 5 and rare.total == 6  # the snowmen ([UNK]) and fragments of "zzqxj"
    assert profile.rate("rejected") == 0.25
    with pytest.raises(ValueError, match="unknown health"):
        builder.set_health(speed=1)

    profile.save(tmp_path / "p")
    back = Profile.load(tmp_path / "p")
    assert back.histograms == profile.histograms and back.health == profile.health
    assert back.vectors is None and not (tmp_path / "p" / "vectors.npy").exists()


def test_chunked_build_equals_one_pass_and_survives_save_load(tmp_path: Path, tiny_dir: Path) -> None:
    tok = load_tokenizer(tiny_dir)
    rng = np.random.default_rng(2)
    words = ["cat", "dog", "market", "shares", "rose", "percent", "xylophonist", "qzv"]
    a = [" ".join(rng.choice(words, rng.integers(1, 20))) for _ in range(600)]
    b = [" ".join(rng.choice(words, rng.integers(1, 20))) for _ in range(600)]
    scores = rng.random(600)
    vecs = rng.normal(size=(1200, 16)).astype(np.float32)

    def build(cuts: list[int]) -> Profile:
        builder = ProfileBuilder(tok, 24, "bi", 0.5, "traffic", k=64)
        for lo, hi in zip([0, *cuts], [*cuts, 600], strict=True):
            builder.add(a[lo:hi], b[lo:hi], scores[lo:hi], vecs[2 * lo : 2 * hi])
        return builder.finish()

    one = build([])
    parts = [build([]) for _ in range(0)]
    pieces = []
    for lo, hi in ((0, 100), (100, 450), (450, 600)):
        builder = ProfileBuilder(tok, 24, "bi", 0.5, "traffic", k=64)
        builder.add(a[lo:hi], b[lo:hi], scores[lo:hi], vecs[2 * lo : 2 * hi])
        pieces.append(builder.finish())
    merged = pieces[0].merge(pieces[1]).merge(pieces[2])
    assert parts == []
    assert merged.histograms == one.histograms == build([37, 300]).histograms
    assert merged.positives == one.positives and merged.n_pairs == 600
    np.testing.assert_array_equal(merged.vectors.array(), one.vectors.array())

    one.save(tmp_path / "one")
    back = Profile.load(tmp_path / "one")
    np.testing.assert_array_equal(back.vectors.array(), one.vectors.array())
    assert back.vectors.seen == 1200
    # a loaded sample still merges as one pass would
    np.testing.assert_array_equal(
        back.merge(pieces[0]).vectors.array(), one.vectors.merge(pieces[0].vectors).array()
    )


def test_builder_memory_stays_flat_as_rows_grow(tiny_dir: Path) -> None:
    tok = load_tokenizer(tiny_dir)
    rng = np.random.default_rng(3)
    chunk_a = [f"sentence number {i} about markets" for i in range(500)]

    def retained(chunks: int) -> int:
        tracemalloc.start()
        builder = ProfileBuilder(tok, 32, "bi", 0.5, "traffic", k=64)
        base = tracemalloc.get_traced_memory()[0]
        for c in range(chunks):
            texts = [f"{t} {c}" for t in chunk_a]  # new texts every chunk: the text sample must stay bounded
            builder.add(texts, texts[::-1], rng.random(500))
        size = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        return size

    small, large = retained(3), retained(15)
    assert large < small * 1.5 + 200_000, (small, large)


def test_reference_profile_scores_dev_pairs_and_samples_vectors(tiny_dir: Path) -> None:
    dev = pl.DataFrame(
        {
            "text_a": [f"the cat sat on mat {i}" for i in range(80)],
            "text_b": [f"a dog ran {i}" for i in range(80)],
        }
    )
    ref = reference_profile(tiny_dir, dev.to_arrow(), None, model="tiny", version="1", k=32)
    assert ref.kind == "reference" and ref.form == "bi" and ref.threshold == 0.5
    assert ref.n_pairs == 80 and ref.histograms["score"].total == 80
    assert ref.vectors is not None and ref.vectors.array().shape == (32, 32)


def test_policy_rejects_unknown_keys_and_statistics() -> None:
    assert MonitorPolicy().history_nights == 30
    with pytest.raises(ValueError, match="extra"):
        MonitorPolicy.model_validate({"psi_typo": 1})
    with pytest.raises(ValueError, match="unknown statistic"):
        MonitorPolicy.model_validate({"psi": {"lenght": 0.2}})
