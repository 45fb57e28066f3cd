"""Sentence embeddings and pair mining over many sentences: `simpair encode` and `simpair mine`.

`encode_file` writes a bi-encoder's vectors of a Parquet file's sentences (streamed, bounded
memory); `run_mine` finds similar pairs within one file or each sentence's nearest neighbours in a
corpus (exact or HNSW search, corpus pieces within a memory budget), optionally re-ranked by a
cross-encoder. No Prefect here: `flows/mine.py` runs the same stages as tasks.
"""

from simpair.mining.run import MineSummary, run_mine
from simpair.mining.search import MineOptions
from simpair.mining.sentences import InputError

__all__ = ["InputError", "MineOptions", "MineSummary", "run_mine"]
