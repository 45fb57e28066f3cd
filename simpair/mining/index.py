"""Top-k cosine neighbours of query vectors in a piece of corpus vectors: exact, or an HNSW index.

Vectors are L2-normalised, so cosine is the inner product. Two ways, chosen per piece:

- exact: blocks of queries times the piece (one matrix product each, score blocks capped in bytes),
  `argpartition` for the top k. Exact and, below tens of thousands of vectors, also the fastest.
- hnsw: faiss' `IndexHNSWFlat` (inner product). Building and querying the graph grows about as
  n log n instead of n^2; docs/mining.md records the measurement (recall@10 against exact, time)
  that chose faiss over usearch and set `EXACT_MAX`. faiss is an optional dependency (`mine`
  extra); without it every piece is searched exactly.

`merge_top_k` folds one piece's results into the running top k, so a corpus larger than memory is
searched piece by piece and gives the same neighbours as one piece (up to ties).
"""

from __future__ import annotations

import importlib.util
import logging

import numpy as np

from simpair.defaults import INDEX_METHODS as METHODS

log = logging.getLogger(__name__)

# Below this many corpus vectors in a piece exact search costs less CPU than a faiss graph (it overtakes
# faiss between 20k and 30k vectors of 384 dims, docs/mining.md).
EXACT_MAX = 20_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128
SCORE_BLOCK_BYTES = 16 * 2**20  # one block of scores; argpartition holds about 4x this at once


def have_faiss() -> bool:
    return importlib.util.find_spec("faiss") is not None


def choose_method(method: str, corpus_rows: int) -> str:
    """The method one piece is searched with: `auto` means exact for small pieces or without faiss."""
    if method not in METHODS:
        raise ValueError(f"index method must be one of {', '.join(METHODS)}; got {method!r}")
    if method == "hnsw" and not have_faiss():
        raise ValueError("--index hnsw needs faiss: pip install 'simpair[mine]' (or faiss-cpu)")
    if method == "auto":
        return "hnsw" if corpus_rows > EXACT_MAX and have_faiss() else "exact"
    return method


def _empty(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n, k), -np.inf, dtype=np.float32), np.full((n, k), -1, dtype=np.int64)


def exact_top_k(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, corpus rows) of each query's k best, best first; -inf / -1 where the piece is smaller."""
    n, m = len(queries), len(corpus)
    scores, idx = _empty(n, k)
    if n == 0 or m == 0:
        return scores, idx
    kk = min(k, m)
    block = max(1, SCORE_BLOCK_BYTES // (4 * m))
    for start in range(0, n, block):
        sims = queries[start : start + block] @ corpus.T
        top = (
            np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            if kk < m
            else np.tile(np.arange(m), (len(sims), 1))
        )
        top_scores = np.take_along_axis(sims, top, axis=1)
        order = np.argsort(-top_scores, axis=1, kind="stable")
        scores[start : start + block, :kk] = np.take_along_axis(top_scores, order, axis=1)
        idx[start : start + block, :kk] = np.take_along_axis(top, order, axis=1)
    return scores, idx


def hnsw_top_k(
    queries: np.ndarray, corpus: np.ndarray, k: int, threads: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Like `exact_top_k`, through a faiss HNSW graph built over the piece (approximate)."""
    import faiss

    if threads:
        faiss.omp_set_num_threads(threads)
    index = faiss.IndexHNSWFlat(corpus.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = max(HNSW_EF_SEARCH, k)
    index.add(np.ascontiguousarray(corpus, dtype=np.float32))
    scores, idx = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    missing = idx < 0
    scores = scores.astype(np.float32)
    scores[missing] = -np.inf
    return scores, idx.astype(np.int64)


def top_k(
    queries: np.ndarray, corpus: np.ndarray, k: int, method: str = "auto", threads: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's k nearest corpus rows in this piece, by the chosen method."""
    if choose_method(method, len(corpus)) == "hnsw":
        return hnsw_top_k(queries, corpus, k, threads)
    return exact_top_k(queries, corpus, k)


def merge_top_k(
    scores: np.ndarray, idx: np.ndarray, new_scores: np.ndarray, new_idx: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The k best of two candidate lists per query (indices already global), best first."""
    all_scores = np.concatenate([scores, new_scores], axis=1)
    all_idx = np.concatenate([idx, new_idx], axis=1)
    # stable sort on -score keeps earlier pieces first among ties: same order as one piece
    order = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(all_scores, order, axis=1), np.take_along_axis(all_idx, order, axis=1)


def search_pieces(
    queries: np.ndarray,
    pieces: object,
    k: int,
    method: str = "auto",
    threads: int | None = None,
    exclude_self: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Top k over a corpus given as (offset, vectors) pieces; `exclude_self` drops corpus row == query row.

    With `exclude_self` (mining within one set) each piece is asked for k + 1, so a query's own row,
    if it is in the piece, can be dropped and k others still remain.
    """
    scores, idx = _empty(len(queries), k)
    ask = k + 1 if exclude_self else k
    for offset, vectors in pieces:  # type: ignore[attr-defined]
        s, i = top_k(queries, vectors, ask, method, threads)
        i = np.where(i >= 0, i + offset, -1)
        if exclude_self:
            own = i == np.arange(len(queries))[:, None]
            s = np.where(own, -np.inf, s)
            i = np.where(own, -1, i)
        scores, idx = merge_top_k(scores, idx, s, i, k)
    return scores, idx
