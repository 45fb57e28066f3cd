"""Mined pairs as a table: ids and texts of both sides, scores, ranks, models; re-ranked and written.

Why a table and not the candidates' indices: the output must stand on its own (a reviewer reads
texts; a join needs ids), and which model versions produced each score travels in every row and in
the file's metadata, so a pairs file from last week can still be traced. Re-ranking runs the
cross-encoder on the found pairs only (a few per sentence), in chunks with progress, and adds its
score next to the bi-encoder's: the order stays the bi-encoder's, the second score is for deciding.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from simpair.atomic import atomic_path
from simpair.mining.search import Candidates, MineOptions
from simpair.mining.sentences import REJECT_SCHEMA, Rejects
from simpair.progress import progress
from simpair.runtime.model_ref import ModelRef

RERANK_CHUNK = 2048
METADATA_KEY = b"simpair.mine"


def first_ids(ids: list[str], inverse: list[int], n_distinct: int) -> list[str]:
    """The id standing for each distinct text: that of the first row carrying it."""
    out: list[str | None] = [None] * n_distinct
    for id_, d in zip(ids, inverse, strict=True):
        if out[d] is None:
            out[d] = id_
    return out  # type: ignore[return-value]


def pairs_table(
    candidates: Candidates,
    a_ids: list[str],
    a_texts: list[str],
    b_ids: list[str],
    b_texts: list[str],
    model: ModelRef,
) -> pa.Table:
    """One row per found pair; `a_*` index the input's distinct texts, `b_*` the input's or corpus's."""
    ia, ib = candidates.a, candidates.b
    return pa.table(
        {
            "id_a": pa.array([a_ids[i] for i in ia], pa.string()),
            "text_a": pa.array([a_texts[i] for i in ia], pa.string()),
            "id_b": pa.array([b_ids[i] for i in ib], pa.string()),
            "text_b": pa.array([b_texts[i] for i in ib], pa.string()),
            "score": pa.array(candidates.score, pa.float32()),
            "rank": pa.array(candidates.rank, pa.int32()),
            "model": pa.array([model.label] * len(candidates), pa.string()).dictionary_encode(),
        }
    )


def rerank(table: pa.Table, predictor: object, reranker: ModelRef, options: MineOptions) -> pa.Table:
    """Add `rerank_score` (and `rerank_probability` for paraphrase models) from the pair scorer."""
    a, b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    scores: list[np.ndarray] = []
    probabilities: list[np.ndarray] = []
    bar = progress(total=len(a), desc="rerank", unit="pair", disable=not options.show_progress)
    for start in range(0, len(a), RERANK_CHUNK):
        end = start + RERANK_CHUNK
        out = predictor.predict(a[start:end], b[start:end], batch_size=options.batch_size)  # type: ignore[attr-defined]
        scores.append(out["score"])
        if "probability" in out:
            probabilities.append(out["probability"])
        bar.update(len(out["score"]))
    bar.close()
    empty = np.zeros(0, dtype=np.float32)
    table = table.append_column("rerank_score", pa.array(np.concatenate(scores or [empty]), pa.float32()))
    if probabilities or (reranker.task == "paraphrase" and not len(a)):
        prob = np.concatenate(probabilities or [empty])
        table = table.append_column("rerank_probability", pa.array(prob, pa.float32()))
    labels = pa.array([reranker.label] * len(a), pa.string()).dictionary_encode()
    return table.append_column("rerank_model", labels)


def rejects_path(output: str | Path) -> Path:
    """Where the rows set aside go: beside the output, `<name>.rejects.parquet`."""
    output = Path(output)
    return output.with_name(output.name.removesuffix(".parquet") + ".rejects.parquet")


def write_rejects(output: str | Path, by_file: dict[str, Rejects]) -> Path | None:
    """The rejected rows of every input (file, row, id, reason); None (and no file) when there are none."""
    path = rejects_path(output)
    tables = [
        rejects.table().add_column(0, "file", pa.array([name] * len(rejects), pa.string()))
        for name, rejects in by_file.items()
        if len(rejects)
    ]
    if not tables:
        path.unlink(missing_ok=True)  # a stale file from an earlier run would describe other rows
        return None
    schema = pa.schema([("file", pa.string()), *REJECT_SCHEMA])
    with atomic_path(path) as tmp:
        pq.write_table(pa.concat_tables(tables).cast(schema), tmp)
    return path


def write_pairs(table: pa.Table, output: str | Path, metadata: dict[str, object]) -> Path:
    """The pairs file, written whole under a temporary name and renamed (never half a file)."""
    output = Path(output)
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(metadata, sort_keys=True).encode()
    with atomic_path(output) as tmp:
        pq.write_table(table.replace_schema_metadata(meta), tmp, compression="zstd")
    return output


def read_mine_metadata(path: str | Path) -> dict[str, object]:
    """What a pairs file says about how it was mined (models, k, threshold, index)."""
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(METADATA_KEY, b"{}"))
