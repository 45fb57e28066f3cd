"""The bi-encoder embedding store: same scores as without it, each distinct sentence encoded once per run.

Real saved tiny bi-encoders, real Parquet batches with Zipf-repeated sentences, the real entry points
(`score_inbox`, and `simpair score` in a subprocess that is SIGKILLed mid-file).
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import test_scoring_support as support
from test_scoring_support import assert_exactly_once, assert_same_outputs, outputs_by_name, write_batch

from simpair.cli.score_cmd import summary_totals
from simpair.runtime.embedding_store import EmbeddingStore, open_store, release_store
from simpair.runtime.loader import load_predictor
from simpair.scoring import score_inbox
from simpair.scoring.chunk import ChunkResult
from simpair.scoring.inbox import content_hash
from simpair.scoring.summary import summary_markdown

tiny_bi = support.tiny_bi
SIMPAIR = str(Path(sys.executable).with_name("simpair"))
CHUNK = 300


def _pool(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return list(dict.fromkeys(" ".join(rng.choices(support.WORDS, k=rng.randint(2, 14))) for _ in range(n)))


def zipf_pairs(n: int, pool: list[str], seed: int, prefix: str) -> pa.Table:
    """n pairs whose sentences repeat with Zipf frequencies (a few sentences in many pairs)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(pool) + 1)
    a, b = (rng.choice(len(pool), n, p=weights / weights.sum()) for _ in range(2))
    return pa.table(
        {
            "pair_id": [f"{prefix}{i:06d}" for i in range(n)],
            "text_a": [pool[i] for i in a],
            "text_b": [pool[i] for i in b],
        }
    )


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pa.Table]:
    pool = _pool(500, seed=3)
    return {"n1.parquet": zipf_pairs(1500, pool, 1, "a"), "n2.parquet": zipf_pairs(1200, pool, 2, "b")}


def _inbox(root: Path, batches: dict[str, pa.Table]) -> Path:
    for name, table in batches.items():
        write_batch(table, root / "inbox" / name, row_group_size=400)
    return root / "inbox"


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory, tiny_bi: Path, batches: dict[str, pa.Table]) -> dict:
    """The outputs scored without the store (dedup within a chunk only): what the store must reproduce."""
    root = tmp_path_factory.mktemp("plain")
    inbox = _inbox(root, batches)
    summary = score_inbox(
        str(inbox), root / "out", str(tiny_bi), root / "home", chunk_rows=CHUNK, threads=1,
        backend="torch", embedding_store=False,
    )  # fmt: skip
    assert summary.embedding_store is None and summary.sentences_encoded == 0
    return outputs_by_name(root / "out")


def _by_chunk(results: list[ChunkResult], inbox: Path, batches: dict[str, pa.Table]) -> list[set[str]]:
    """The distinct sentences of each scored chunk, in the order the chunks were scored."""
    tables = {content_hash(str(inbox / name)): table for name, table in batches.items()}
    out = []
    for r in results:
        part = tables[r.sha256].slice(r.idx * CHUNK, CHUNK)
        out.append(set(part.column("text_a").to_pylist()) | set(part.column("text_b").to_pylist()))
    return out


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_store_gives_the_same_scores_and_encodes_each_sentence_once(
    tmp_path: Path, tiny_bi: Path, batches: dict[str, pa.Table], plain: dict, backend: str
) -> None:
    inbox, results = _inbox(tmp_path, batches), []
    summary = score_inbox(
        str(inbox), tmp_path / "out", str(tiny_bi), tmp_path / "home", chunk_rows=CHUNK, threads=1,
        backend=backend, on_chunk_done=results.append,
    )  # fmt: skip
    assert_same_outputs(plain, outputs_by_name(tmp_path / "out"), atol=1e-6)
    assert len(results) == 9  # 5 + 4 chunks over two files
    seen: set[str] = set()
    for result, sentences in zip(results, _by_chunk(results, inbox, batches), strict=True):
        assert result.sentences_encoded == len(sentences - seen)  # later chunks and files: new ones only
        assert result.memory_hits == len(sentences & seen) and result.disk_hits == 0
        seen |= sentences
    assert summary.sentences_encoded == len(seen) < sum(len(s) for s in _by_chunk(results, inbox, batches))
    assert summary.embedding_memory_hits > 0 and summary.rows_scored == 2700
    assert summary.embedding_store == str(tmp_path / "out" / "_ledger" / "embeddings")
    assert not (tmp_path / "out" / "_ledger" / "embeddings").exists(), "a run's own store ends with it"
    report = (
        f"{summary.sentences_encoded} distinct sentences encoded, {summary.embedding_memory_hits} cache hits"
    )
    assert report in summary_markdown(summary) and any(report in line for line in summary_totals(summary))


def test_memory_bound_spills_to_disk_and_scores_stay_the_same(
    tmp_path: Path, tiny_bi: Path, batches: dict[str, pa.Table], plain: dict
) -> None:
    inbox = _inbox(tmp_path, batches)
    summary = score_inbox(
        str(inbox), tmp_path / "out", str(tiny_bi), tmp_path / "home", chunk_rows=CHUNK, threads=1,
        backend="torch", embedding_memory_mb=0.005,  # 40 vectors of 32 floats
    )  # fmt: skip
    assert summary.embedding_disk_hits > 0
    assert_same_outputs(plain, outputs_by_name(tmp_path / "out"), atol=1e-6)


def _vectors_on_disk(folder: Path) -> int:
    total = 0
    for path in folder.glob("*.sqlite"):
        with closing(sqlite3.connect(path)) as conn:
            total += conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    return total


def _chunks_done(out: Path) -> int:
    try:
        with sqlite3.connect(
            f"file:{out / '_ledger' / 'ledger.sqlite'}?mode=ro", uri=True, timeout=5
        ) as conn:
            return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


@pytest.mark.slow  # a `simpair score` subprocess: ~8 s of its start-up on an idle machine
def test_sigkilled_run_resumes_with_stored_vectors_and_same_scores(
    tmp_path: Path, tiny_bi: Path, batches: dict[str, pa.Table], plain: dict
) -> None:
    inbox, out = _inbox(tmp_path, batches), tmp_path / "out"
    cmd = [SIMPAIR, "score", "--inbox", str(inbox), "--out", str(out), "--model", str(tiny_bi),
           "--chunk-rows", str(CHUNK), "--threads", "1", "--backend", "torch", "--no-prefect"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _chunks_done(out) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "scoring ended before the kill"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    stored = _vectors_on_disk(out / "_ledger" / "embeddings")
    assert stored > 0, "the killed run committed its vectors"

    resumed = score_inbox(
        str(inbox), out, str(tiny_bi), tmp_path / "home", chunk_rows=CHUNK, threads=1, backend="torch"
    )
    assert resumed.rows_scored_this_run < 2700 and resumed.embedding_disk_hits > 0
    assert_same_outputs(plain, outputs_by_name(out), atol=1e-6)
    output = pa.concat_tables(outputs_by_name(out).values())
    assert_exactly_once(pa.concat_tables(list(batches.values())), output)


def test_cache_across_nights_is_reused_by_the_same_model_only(
    tmp_path: Path, tiny_bi: Path, batches: dict[str, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    from simpair.models import save_tiny_model

    cache, (first, second) = tmp_path / "cache", list(batches.items())
    night = {"chunk_rows": CHUNK, "threads": 1, "backend": "torch", "embedding_cache": cache}
    one = score_inbox(
        str(_inbox(tmp_path / "1", dict([first]))), tmp_path / "o1", str(tiny_bi), tmp_path, **night
    )
    two = score_inbox(
        str(_inbox(tmp_path / "2", dict([second]))), tmp_path / "o2", str(tiny_bi), tmp_path, **night
    )
    sentences = [
        set(t.column("text_a").to_pylist()) | set(t.column("text_b").to_pylist()) for t in batches.values()
    ]
    assert two.sentences_encoded == len(sentences[1] - sentences[0])  # night 2 encodes new sentences only
    assert two.embedding_disk_hits == len(sentences[1] & sentences[0])
    assert one.embedding_store_kept and one.sentences_encoded == len(sentences[0])
    assert _vectors_on_disk(cache) == len(sentences[0] | sentences[1])

    other = save_tiny_model(tmp_path / "tiny-bi-v2", task="sts", kind="bi", seed=2)  # another version
    three = score_inbox(
        str(_inbox(tmp_path / "3", dict([second]))), tmp_path / "o3", str(other), tmp_path, **night
    )
    assert three.sentences_encoded == len(sentences[1]) and three.embedding_disk_hits == 0
    assert len(list(cache.glob("*.sqlite"))) == 2
    table = second[1]
    want = load_predictor(other).predict(
        table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    )
    got = pa.concat_tables(outputs_by_name(tmp_path / "o3").values()).column("score").to_numpy()
    np.testing.assert_allclose(got, want["score"], atol=1e-6)

    # the same weights after a runtime upgrade (another onnxruntime, int8 recipe or CPU): encoded afresh
    from simpair.runtime import graph_cache

    monkeypatch.setattr(graph_cache, "_environment", lambda: "onnxruntime=9.9.9|upgraded")
    four = score_inbox(
        str(_inbox(tmp_path / "4", dict([second]))), tmp_path / "o4", str(tiny_bi), tmp_path, **night
    )
    assert four.sentences_encoded == len(sentences[1]) and four.embedding_disk_hits == 0
    assert len(list(cache.glob("*.sqlite"))) == 3


def test_store_reads_back_only_whole_vectors_and_keeps_its_memory_bound(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.array([[len(t), ord(t[0]), 1.0, 2.0] for t in texts], dtype=np.float32)

    store = EmbeddingStore(tmp_path, "m|1|w|fp32|Predictor", memory_mb=3 * 16 / 2**20)  # 3 vectors
    vectors, counts = store.lookup(["ab", "c", "ab", "de", "fgh"], encode)
    assert calls == [["ab", "c", "de", "fgh"]] and (counts.encoded, counts.memory_hits) == (4, 0)
    np.testing.assert_array_equal(vectors[:, 0], [2, 1, 2, 2, 3])
    assert store.memory_entries == 3
    with sqlite3.connect(store.path) as conn:  # a vector cut short must never come back as valid
        key = conn.execute("SELECT key FROM vectors LIMIT 1").fetchone()[0]
        conn.execute("UPDATE vectors SET vec = ? WHERE key = ?", (b"\0" * 8, key))
    fresh = EmbeddingStore(tmp_path, "m|1|w|fp32|Predictor")
    again, counts = fresh.lookup(["ab", "c", "de", "fgh"], encode)
    assert (counts.encoded, counts.disk_hits) == (1, 3)
    np.testing.assert_array_equal(again, vectors[[0, 1, 3, 4]])
    with sqlite3.connect(store.path) as conn:  # another identity behind the same file name: refused
        conn.execute("UPDATE meta SET value = 'someone else' WHERE name = 'identity'")
    with pytest.raises(RuntimeError, match="holds vectors of"):
        EmbeddingStore(tmp_path, "m|1|w|fp32|Predictor")


def test_a_worker_outliving_a_run_gets_a_fresh_store_once_the_run_removed_its_own(tmp_path: Path) -> None:
    def encode(texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)

    folder = tmp_path / "out" / "_ledger" / "embeddings"
    first = open_store(folder, "m|1|w|fp32|Predictor")
    first.lookup(["a", "b"], encode)
    assert open_store(folder, "m|1|w|fp32|Predictor") is first  # one store per process for the run
    release_store(folder, keep=False)  # what a finished run does
    assert not folder.exists()
    again = open_store(folder, "m|1|w|fp32|Predictor")
    assert again is not first
    _, counts = again.lookup(["a", "c"], encode)
    assert (counts.encoded, counts.memory_hits, counts.disk_hits) == (2, 0, 0)
    first.path.unlink()  # a long-lived worker whose store file was removed under it reopens one
    assert open_store(folder, "m|1|w|fp32|Predictor") is not again


def test_a_stack_scores_its_bi_encoder_member_through_the_store(
    tmp_path: Path, batches: dict[str, pa.Table]
) -> None:
    stack = support.write_tiny_stack(tmp_path / "stack")
    inbox = _inbox(tmp_path, batches)
    runs = {
        store: score_inbox(
            str(inbox),
            tmp_path / f"out-{store}",
            str(stack),
            tmp_path / "home",
            chunk_rows=CHUNK,
            threads=1,
            backend="torch",
            embedding_store=store,
        )  # fmt: skip
        for store in (False, True)
    }
    assert_same_outputs(outputs_by_name(tmp_path / "out-False"), outputs_by_name(tmp_path / "out-True"))
    distinct = {
        t for table in batches.values() for t in table["text_a"].to_pylist() + table["text_b"].to_pylist()
    }
    assert runs[True].sentences_encoded == len(distinct) and runs[True].embedding_memory_hits > 0
    assert runs[False].embedding_store is None and runs[False].sentences_encoded == 0
