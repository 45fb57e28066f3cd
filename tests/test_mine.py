"""`simpair encode` and `simpair mine`: exact results, corpus pieces, re-ranking, bad inputs, the flow."""

from __future__ import annotations

import importlib.util
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from simpair.cli import app
from simpair.cli.failures import describe
from simpair.mining.encode import embedding_matrix, read_encode_metadata
from simpair.mining.index import exact_top_k, hnsw_top_k, search_pieces
from simpair.mining.pairs import read_mine_metadata
from simpair.models import Predictor, save_tiny_model
from simpair.runtime.embedding_store import close_stores

SUBJECTS = ["The cat", "A man", "Two children", "The old dog", "A woman in red", "The team"]
VERBS = ["is playing with", "looks at", "runs towards", "quietly ignores"]
OBJECTS = ["a ball.", "the river bank near the town.", "an apple", "the guitar on the stage.", "a red car."]


def sentences(n: int, offset: int = 0) -> list[str]:
    combos = list(itertools.product(SUBJECTS, VERBS, OBJECTS))
    return [" ".join(c) for c in combos[offset : offset + n]]


def write_input(path: Path, texts: list[str | None], ids: bool = True) -> Path:
    columns: dict[str, list] = {"text": texts}
    if ids:
        columns["sid"] = [f"s{i}" for i in range(len(texts))]
    pq.write_table(pa.table(columns), path, row_group_size=16)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mine-models")
    return {
        "bi": save_tiny_model(root / "bi", task="sts", kind="bi", seed=1),
        "cross": save_tiny_model(root / "cross", task="paraphrase", kind="cross", seed=2),
    }


@pytest.fixture(scope="module")
def bi_predictor(models: dict[str, Path]) -> Predictor:
    return Predictor.load(models["bi"], device="cpu")


def mine(tmp_path: Path, models: dict[str, Path], *args: str, name: str = "pairs.parquet") -> pa.Table:
    out = tmp_path / name
    result = CliRunner().invoke(
        app,
        ["mine", "--model", str(models["bi"]), "--output", str(out), "--home", str(tmp_path / "home"), *args],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return pq.read_table(out)


def triples(table: pa.Table) -> list[tuple[str, str, float]]:
    columns = (table[name].to_pylist() for name in ("id_a", "id_b", "score"))
    return list(zip(*columns, strict=True))


def assert_same_neighbours(ours: pa.Table, expected: list[tuple[str, str, float]]) -> None:
    """Same (a, b) pairs and scores; a pair may swap only with one of equal score (a tie at the cut)."""
    got = sorted(triples(ours))
    want = sorted(expected)
    assert len(got) == len(want)
    np.testing.assert_allclose(sorted(s for *_, s in got), sorted(s for *_, s in want), atol=1e-5)
    differing = set((a, b) for a, b, _ in got) ^ set((a, b) for a, b, _ in want)
    scores = {(a, b): s for a, b, s in got + want}
    boundary = {round(s, 4) for s in (scores[p] for p in differing)}
    assert len(differing) <= 2 * len(boundary), differing


def test_mining_within_a_file_equals_exact_search(tmp_path: Path, models, bi_predictor) -> None:
    texts = sentences(60)
    write_input(tmp_path / "in.parquet", texts)
    table = mine(
        tmp_path, models, "--input", str(tmp_path / "in.parquet"), "--id-column", "sid", "--top-k", "3"
    )
    vectors = bi_predictor.embed(texts)
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    expected: dict[tuple[str, str], float] = {}
    ranks: dict[tuple[str, str], int] = {}
    for i, row in enumerate(sims):
        for rank, j in enumerate(np.argsort(-row, kind="stable")[:3], start=1):
            a, b = sorted((i, int(j)))
            expected[(f"s{a}", f"s{b}")] = float(sims[a, b])
            ranks[(f"s{a}", f"s{b}")] = min(rank, ranks.get((f"s{a}", f"s{b}"), rank))
    assert_same_neighbours(table, [(a, b, s) for (a, b), s in expected.items()])
    assert table["score"].to_pylist() == sorted(table["score"].to_pylist(), reverse=True)
    got_ranks = zip(
        table["id_a"].to_pylist(), table["id_b"].to_pylist(), table["rank"].to_pylist(), strict=True
    )
    matching = [r == ranks[(a, b)] for a, b, r in got_ranks if (a, b) in ranks]
    assert sum(matching) >= len(matching) - 2  # the better of the two sentences' ranks (ties aside)
    meta = read_mine_metadata(tmp_path / "pairs.parquet")
    assert meta["mode"] == "paraphrase" and meta["top_k"] == 3 and meta["model"].startswith("bi/local-")


def test_corpus_search_threshold_and_pieces(tmp_path: Path, models, bi_predictor) -> None:
    queries, corpus = sentences(20), sentences(100, offset=20)
    write_input(tmp_path / "q.parquet", queries)
    write_input(tmp_path / "c.parquet", corpus)
    args = ["--input", str(tmp_path / "q.parquet"), "--corpus", str(tmp_path / "c.parquet"), "--top-k", "5"]
    whole = mine(tmp_path, models, *args, "--id-column", "sid", name="whole.parquet")
    sims = bi_predictor.embed(queries) @ bi_predictor.embed(corpus).T
    expected = [
        (f"s{i}", f"s{j}", float(sims[i, j]))
        for i in range(20)
        for j in np.argsort(-sims[i], kind="stable")[:5]
    ]
    assert_same_neighbours(whole, expected)
    assert sorted(set(whole["rank"].to_pylist())) == [1, 2, 3, 4, 5]

    # a budget of ~0.003 MB holds a few vectors: the corpus goes in many pieces, same top k
    pieces = mine(tmp_path, models, *args, "--id-column", "sid", "--max-memory-mb", "0.003", name="p.parquet")
    assert read_mine_metadata(tmp_path / "p.parquet")["pieces"] > 5
    np.testing.assert_allclose(pieces["score"].to_numpy(), whole["score"].to_numpy(), atol=1e-5)
    assert_same_neighbours(pieces, triples(whole))

    if importlib.util.find_spec("faiss") is not None:  # HNSW on 100 vectors finds the exact neighbours
        graph = mine(tmp_path, models, *args, "--id-column", "sid", "--index", "hnsw", name="h.parquet")
        assert read_mine_metadata(tmp_path / "h.parquet")["index"] == "hnsw"
        assert_same_neighbours(graph, triples(whole))

    cut = float(np.median(whole["score"].to_numpy()))
    kept = mine(tmp_path, models, *args, "--id-column", "sid", "--threshold", str(cut), name="t.parquet")
    assert (
        kept.num_rows == int((whole["score"].to_numpy() >= cut).sum())
        and min(kept["score"].to_pylist()) >= cut
    )


def test_within_a_file_in_pieces_equals_one_piece(tmp_path: Path, models) -> None:
    write_input(tmp_path / "in.parquet", sentences(50))
    args = ["--input", str(tmp_path / "in.parquet"), "--top-k", "4"]
    one = mine(tmp_path, models, *args, name="one.parquet")
    many = mine(tmp_path, models, *args, "--max-memory-mb", "0.002", name="many.parquet")
    assert read_mine_metadata(tmp_path / "many.parquet")["pieces"] > 5
    assert_same_neighbours(many, triples(one))


def test_rerank_adds_the_cross_encoder_scores(tmp_path: Path, models) -> None:
    write_input(tmp_path / "in.parquet", sentences(30))
    table = mine(
        tmp_path,
        models,
        "--input",
        str(tmp_path / "in.parquet"),
        "--top-k",
        "2",
        "--rerank",
        str(models["cross"]),
    )
    assert {"rerank_score", "rerank_probability", "rerank_model"} <= set(table.column_names)
    cross = Predictor.load(models["cross"], device="cpu")
    expected = cross.predict(table["text_a"].to_pylist(), table["text_b"].to_pylist())["probability"]
    np.testing.assert_allclose(table["rerank_probability"].to_numpy(), expected, atol=1e-6)
    assert read_mine_metadata(tmp_path / "pairs.parquet")["rerank_model"].startswith("cross/")


def test_bad_inputs_fail_clearly_or_set_rows_aside(tmp_path: Path, models) -> None:
    runner = CliRunner()
    base = [
        "mine",
        "--model",
        str(models["bi"]),
        "--output",
        str(tmp_path / "o.parquet"),
        "--home",
        str(tmp_path),
    ]
    (tmp_path / "zero.parquet").write_bytes(b"")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "norows.parquet")
    write_input(tmp_path / "other.parquet", sentences(3))
    for name, column, words in [
        ("zero.parquet", "text", ["zero.parquet", "empty file"]),
        ("norows.parquet", "text", ["norows.parquet", "empty file (no rows)"]),
        ("other.parquet", "sentence", ["no column 'sentence'", "columns found: text, sid"]),
    ]:
        result = runner.invoke(app, [*base, "--input", str(tmp_path / name), "--column", column])
        assert result.exit_code == 1
        line = describe(result.exception)
        assert "\n" not in line and all(w in line for w in words), line

    texts = sentences(12)
    texts[3], texts[7] = None, "   "
    write_input(tmp_path / "nulls.parquet", texts)
    table = mine(
        tmp_path, models, "--input", str(tmp_path / "nulls.parquet"), "--id-column", "sid", "--top-k", "2"
    )
    assert not {"s3", "s7"} & set(table["id_a"].to_pylist() + table["id_b"].to_pylist())
    rejects = pq.read_table(tmp_path / "pairs.rejects.parquet").to_pylist()
    assert [(r["row"], r["id"], r["reason"]) for r in rejects] == [
        (3, "s3", "null text"),
        (7, "s7", "empty text"),
    ]


def test_encode_writes_embeddings_and_refuses_cross_encoders(tmp_path: Path, models, bi_predictor) -> None:
    texts = sentences(40)
    texts[5] = None
    write_input(tmp_path / "in.parquet", texts)
    out = tmp_path / "emb.parquet"
    args = ["encode", "--input", str(tmp_path / "in.parquet"), "--output", str(out), "--home", str(tmp_path)]
    result = CliRunner().invoke(
        app, [*args, "--model", str(models["bi"]), "--id-column", "sid", "--batch-rows", "8"]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    table = pq.read_table(out)
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 32)
    assert pq.ParquetFile(out).metadata.num_row_groups > 1  # streamed by batches
    good = [t for t in texts if t is not None]
    np.testing.assert_allclose(embedding_matrix(table), bi_predictor.embed(good), atol=1e-6)
    assert table["id"].to_pylist() == [f"s{i}" for i in range(40) if i != 5]
    meta = read_encode_metadata(out)
    assert meta["dims"] == 32 and meta["model"] == "bi" and meta["version"].startswith("local-")
    assert pq.read_table(tmp_path / "emb.rejects.parquet")["reason"].to_pylist() == ["null text"]

    refused = CliRunner().invoke(app, [*args, "--model", str(models["cross"])])
    assert refused.exit_code == 1 and "needs a bi-encoder" in str(refused.exception)
    assert "cross model" in str(refused.exception)


def test_hnsw_recall_and_piecewise_merge() -> None:
    try:  # the dev extra installs faiss-cpu: without it this check must fail, not skip into green
        import faiss  # noqa: F401
    except ImportError as missing:
        pytest.fail(f"faiss cannot be imported ({missing}); install the dev extra: pip install -e '.[dev]'")
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(50, 24))
    x = (centres[rng.integers(0, 50, 3000)] + 0.3 * rng.normal(size=(3000, 24))).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[:300]
    _, exact = exact_top_k(q, x, 10)
    _, approx = hnsw_top_k(q, x, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, approx, strict=True)])
    assert recall >= 0.95
    pieces = ((start, x[start : start + 700]) for start in range(0, 3000, 700))
    s_merged, i_merged = search_pieces(q, pieces, 10, method="exact")
    s_exact, _ = exact_top_k(q, x, 10)
    np.testing.assert_allclose(s_merged, s_exact, atol=1e-6)
    assert (i_merged[:, 0] == np.arange(300)).all()  # each query's own vector is its best


def test_mine_flow_runs_on_a_tiny_input(prefect_api: None, tmp_path: Path, models) -> None:
    from simpair.flows.launch import mine as run_flow
    from simpair.mining import MineOptions

    write_input(tmp_path / "in.parquet", sentences(15))
    summary = run_flow(
        tmp_path / "in.parquet",
        tmp_path / "pairs.parquet",
        model=str(models["bi"]),
        rerank_model=str(models["cross"]),
        home=tmp_path / "home",
        options=MineOptions(top_k=2, show_progress=False),
    )
    assert summary.pairs == pq.read_table(tmp_path / "pairs.parquet").num_rows > 0
    assert summary.rerank_model is not None and summary.mode == "paraphrase"


def _mine_json(tmp_path: Path, models, name: str, *args: str) -> dict:
    out, report = tmp_path / f"{name}.parquet", tmp_path / f"{name}.json"
    result = CliRunner().invoke(
        app,
        ["mine", "--model", str(models["bi"]), "--output", str(out), "--home", str(tmp_path / "home"),
         "--json", str(report), *args],
    )  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    assert "embedding store:" in result.output or "--no-embedding-store" in args
    return json.loads(report.read_text()) | {"table": pq.read_table(out)}


def test_mining_encodes_through_the_embedding_store(tmp_path: Path, models) -> None:
    queries = sentences(20)
    write_input(tmp_path / "q.parquet", queries)
    write_input(tmp_path / "c.parquet", sentences(30, offset=20) + queries)  # the queries come back
    search = ["--input", str(tmp_path / "q.parquet"), "--corpus", str(tmp_path / "c.parquet"), "--top-k", "4"]

    # one run: a text in both files is encoded once, and the run's own store is gone afterwards
    once = _mine_json(tmp_path, models, "once", *search)
    assert (once["sentences_encoded"], once["embedding_memory_hits"]) == (50, 20)
    assert once["embedding_store"].endswith("once.parquet.embeddings") and not once["embedding_store_kept"]
    assert not Path(once["embedding_store"]).exists()
    plain = _mine_json(tmp_path, models, "plain", *search, "--no-embedding-store")
    assert plain["sentences_encoded"] == 70 and plain["embedding_store"] is None
    assert triples(plain["table"]) == triples(once["table"])

    # a kept store: the next run encodes nothing and finds the same pairs; `encode` shares it
    cache = tmp_path / "cache"
    first = _mine_json(tmp_path, models, "first", *search, "--embedding-cache", str(cache))
    again = _mine_json(tmp_path, models, "again", *search, "--embedding-cache", str(cache))
    assert first["sentences_encoded"] == 50 and again["sentences_encoded"] == 0
    assert again["embedding_memory_hits"] + again["embedding_disk_hits"] == 70
    assert triples(again["table"]) == triples(once["table"]) and len(list(cache.glob("*.sqlite"))) == 1
    encoded = CliRunner().invoke(
        app,
        ["encode", "--model", str(models["bi"]), "--input", str(tmp_path / "c.parquet"), "--output",
         str(tmp_path / "emb.parquet"), "--home", str(tmp_path), "--embedding-cache", str(cache)],
    )  # fmt: skip
    assert encoded.exit_code == 0 and "0 distinct sentences encoded" in encoded.output, encoded.output

    # what a killed run leaves in the default folder is reused by the rerun, then removed
    leftover = tmp_path / "rerun.parquet.embeddings"
    shutil.copytree(cache, leftover)
    close_stores(cache)  # a fresh process: nothing in memory
    rerun = _mine_json(tmp_path, models, "rerun", *search)
    assert rerun["sentences_encoded"] == 0 and rerun["embedding_disk_hits"] == 50
    assert not leftover.exists() and triples(rerun["table"]) == triples(once["table"])

    # `simpair score` (default backend) and `simpair mine` (the same default) share one cache
    shared = tmp_path / "shared-cache"
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    pq.write_table(
        pa.table({"pair_id": [f"p{i}" for i in range(20)], "text_a": queries, "text_b": queries[::-1]}),
        inbox / "batch.parquet",
    )
    scored = CliRunner().invoke(
        app,
        ["score", "--inbox", str(inbox), "--out", str(tmp_path / "scored"), "--model", str(models["bi"]),
         "--home", str(tmp_path / "home"), "--no-prefect", "--embedding-cache", str(shared)],
    )  # fmt: skip
    assert scored.exit_code == 0, scored.output
    after_score = _mine_json(tmp_path, models, "after-score", *search, "--embedding-cache", str(shared))
    assert (
        after_score["embedding_disk_hits"] + after_score["embedding_memory_hits"] == 40
    )  # 20 in, 20 in corpus
    assert after_score["sentences_encoded"] == 30 and triples(after_score["table"]) == triples(once["table"])

    refused = CliRunner().invoke(
        app, ["mine", "--input", "x", "--output", "y", "--no-embedding-store", "--embedding-cache", "z"]
    )
    message = " ".join(refused.output.replace("│", " ").split())
    assert refused.exit_code == 2 and "keeps the embedding store: it needs embedding_store on" in message
