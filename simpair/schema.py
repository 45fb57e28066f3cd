"""The canonical pair schema every ingested dataset is written in.

One schema for every source means training, evaluation and leakage checks never need to know which
file a pair came from; the contract maps raw columns onto it.
"""

from __future__ import annotations

import pyarrow as pa

PAIR_SCHEMA = pa.schema(
    [
        pa.field("pair_id", pa.string(), nullable=False),
        pa.field("text_a", pa.string(), nullable=False),
        pa.field("text_b", pa.string(), nullable=False),
        pa.field("label", pa.int8(), nullable=True),
        pa.field("score", pa.float32(), nullable=True),
        pa.field("score_raw", pa.float64(), nullable=True),
        pa.field("split", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("dataset_version", pa.string(), nullable=False),
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("source_sha256", pa.string(), nullable=False),
        pa.field("source_line", pa.int64(), nullable=False),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("source_line", pa.int64(), nullable=False),
        pa.field("raw_line", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=True),
        pa.field("split", pa.string(), nullable=True),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("dataset_version", pa.string(), nullable=False),
    ]
)
