"""The defaults `simpair --help` shows, in one module that imports nothing.

The stage named beside each value reads it from here (most under their old names, so
`simpair.runtime.options.DEFAULT_BATCH_SIZE` still works). They live here because the command line
shows them in every help text: reading them from their stages imported numpy, pyarrow and pydantic,
and `simpair --help` took 1.0 s of CPU instead of 0.3 s (measured 2026-11-26, 2 cores).
"""

from __future__ import annotations

# simpair.runtime: how a pinned model runs (score, mine, encode)
DEFAULT_BATCH_SIZE = 64  # sentences or pairs per forward pass (runtime.options)
DEFAULT_BACKEND = "auto"  # ONNX Runtime on CPU when installed, else torch (runtime.precision)
DEFAULT_PRECISION = "auto"  # the fastest precision the model's dev split accepts (runtime.precision)
DEFAULT_EMBEDDING_MEMORY_MB = 512.0  # embedding store memory of a scoring run (runtime.embedding_store)

# simpair.mining: `simpair mine` and `simpair encode`
# STS models are the ones trained for graded similarity: the natural default for mining
DEFAULT_MINE_MODEL = "simpair-sts@champion"
# the store's memory comes on top of --max-memory-mb; mining looks each distinct text up once or
# twice (input, corpus), so misses in memory are cheap disk reads, not re-encodings
DEFAULT_MINE_EMBEDDING_MEMORY_MB = 64.0
DEFAULT_MINE_MEMORY_MB = 512.0  # corpus vectors and index; larger corpora go in pieces (mining.search)
DEFAULT_SENTENCE_BATCH_ROWS = 8192  # sentences read, encoded and written at a time (mining.sentences)
INDEX_METHODS = ("auto", "exact", "hnsw")  # nearest-neighbour search (mining.index)

# simpair.scoring: `simpair score`
DEFAULT_CHUNK_ROWS = 8192  # rows per chunk, the unit of resume and fan-out (scoring.options)
