"""The search stages of mining: neighbours within one set of sentences, or of queries in a corpus.

Why pieces: a corpus's vectors (and an index over them) may not fit in memory, while the queries'
vectors must all stay (every piece is searched with all of them). So the corpus is cut into pieces
that fit `max_memory_mb`, each piece is encoded, searched and dropped, and each query keeps its
running top k (`simpair.mining.index.search_pieces`): one piece or ten give the same neighbours.
Within one set the pieces are slices of the vectors already computed, and a sentence never pairs
with itself; each unordered pair is reported once, as `sentence_transformers.util.paraphrase_mining`
does (a pair is found when either sentence has the other in its top k).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from pydantic import ConfigDict, Field, PositiveFloat

from simpair.defaults import DEFAULT_MINE_EMBEDDING_MEMORY_MB, DEFAULT_MINE_MEMORY_MB
from simpair.mining.encoder import DEFAULT_ENCODE_CHUNK, embed_chunks
from simpair.mining.index import HNSW_M, choose_method, search_pieces
from simpair.runtime.embedding_store import StoreCounts
from simpair.runtime.options import RuntimeOptions


class MineOptions(RuntimeOptions):
    """How to mine (passed whole to every stage, so a Prefect run and an in-process run agree).

    The runtime fields (batch size, threads, backend, embedding store) are `RuntimeOptions`'; the
    store's memory bound is smaller by default here (it comes on top of `max_memory_mb`).
    """

    model_config = ConfigDict(extra="ignore")

    top_k: int = Field(10, ge=1)
    threshold: float | None = None
    index: str = "auto"
    max_memory_mb: float = Field(DEFAULT_MINE_MEMORY_MB, gt=0)
    encode_chunk: int = Field(DEFAULT_ENCODE_CHUNK, ge=1)
    column: str = "text"
    id_column: str | None = None
    corpus_column: str | None = None
    corpus_id_column: str | None = None
    show_progress: bool = True
    embedding_memory_mb: PositiveFloat = DEFAULT_MINE_EMBEDDING_MEMORY_MB


@dataclass
class Candidates:
    """Found pairs as indices into the distinct texts: a (input side), b (input or corpus side)."""

    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    rank: np.ndarray
    pieces: int
    method: str
    encoding: StoreCounts = field(default_factory=StoreCounts)  # the corpus's texts (search only)

    def __len__(self) -> int:
        return len(self.a)


def piece_rows(max_memory_mb: float, dims: int) -> int:
    """Corpus vectors per piece: the vectors plus the HNSW graph's links must fit the budget."""
    per_row = dims * 4 + HNSW_M * 2 * 8
    return max(1, int(max_memory_mb * 2**20 // per_row))


def _slices(vectors: np.ndarray, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, len(vectors), rows):
        yield start, vectors[start : start + rows]


def _flatten(scores: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(query, target, score, rank 1..k) of every found neighbour."""
    found = idx >= 0
    query = np.nonzero(found)[0]
    rank = (np.nonzero(found)[1] + 1).astype(np.int32)
    return query.astype(np.int64), idx[found], scores[found].astype(np.float32), rank


def _keep(scores: np.ndarray, threshold: float | None) -> np.ndarray:
    return np.ones(len(scores), dtype=bool) if threshold is None else scores >= threshold


def search_within(vectors: np.ndarray, options: MineOptions) -> Candidates:
    """Pairs among one set: each sentence's top k others, each unordered pair once (best rank kept)."""
    rows = piece_rows(options.max_memory_mb, vectors.shape[1])
    method = choose_method(options.index, min(rows, len(vectors)))
    k = min(options.top_k, max(len(vectors) - 1, 1))
    scores, idx = search_pieces(vectors, _slices(vectors, rows), k, options.index, options.threads, True)
    query, target, score, rank = _flatten(scores, idx)
    a, b = np.minimum(query, target), np.maximum(query, target)
    # best score first; each unordered pair keeps its first row and the better of its two ranks
    order = np.lexsort((b, a, -score))
    a, b, score, rank = a[order], b[order], score[order], rank[order]
    _, first, inverse = np.unique(a * len(vectors) + b, return_index=True, return_inverse=True)
    best_rank = np.full(len(first), np.iinfo(np.int32).max, dtype=np.int32)
    np.minimum.at(best_rank, inverse, rank)
    by_score = np.argsort(first)
    rows_kept, ranks = first[by_score], best_rank[by_score]
    keep = _keep(score[rows_kept], options.threshold)
    rows_kept, ranks = rows_kept[keep], ranks[keep]
    pieces = -(-len(vectors) // rows)
    return Candidates(a[rows_kept], b[rows_kept], score[rows_kept], ranks, pieces, method)


def search_corpus(
    queries: np.ndarray, encoder: object, corpus_texts: list[str], options: MineOptions
) -> Candidates:
    """Each query's top k among the corpus texts, the corpus encoded and searched piece by piece."""
    rows = piece_rows(options.max_memory_mb, queries.shape[1])
    chunk = min(rows, options.encode_chunk)
    method = choose_method(options.index, min(rows, len(corpus_texts)))
    pieces = _corpus_pieces(encoder, corpus_texts, rows, chunk, options)
    k = max(1, min(options.top_k, len(corpus_texts)))
    scores, idx = search_pieces(queries, pieces, k, options.index, options.threads)
    query, target, score, rank = _flatten(scores, idx)
    keep = _keep(score, options.threshold)
    return Candidates(
        query[keep], target[keep], score[keep], rank[keep], -(-len(corpus_texts) // rows), method
    )


def _corpus_pieces(
    encoder: object, texts: list[str], rows: int, chunk: int, options: MineOptions
) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, vectors) of consecutive corpus pieces of `rows` texts, each encoded when asked for."""
    encoded = embed_chunks(
        encoder,
        texts,
        chunk=chunk,
        batch_size=options.batch_size,
        desc="encode corpus",
        show_progress=options.show_progress,
    )
    parts: list[np.ndarray] = []
    start = held = 0
    for _, vectors in encoded:
        parts.append(vectors)
        held += len(vectors)
        while held >= rows:
            joined = np.concatenate(parts)
            yield start, joined[:rows]
            start += rows
            rest = joined[rows:]
            parts, held = ([rest] if len(rest) else []), len(rest)
    if held:
        yield start, np.concatenate(parts)
