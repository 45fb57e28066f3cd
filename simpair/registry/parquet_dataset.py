"""An MLflow dataset described from a Parquet file's footer: schema and row count, never the rows.

MLflow's own `PandasDataset` holds the whole frame and infers the schema by looking at every value,
so logging a split's lineage would cost memory and time in proportion to the split. The footer has
everything the run's lineage shows (columns, types, rows), in constant time.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from mlflow.data.dataset import Dataset
from mlflow.data.dataset_source_registry import resolve_dataset_source
from mlflow.types import ColSpec, Schema

_MLFLOW_TYPES = {  # Arrow type -> MLflow column type; anything else is logged as a string
    pa.string(): "string",
    pa.large_string(): "string",
    pa.string_view(): "string",
    pa.bool_(): "boolean",
    pa.int8(): "integer",
    pa.int16(): "integer",
    pa.int32(): "integer",
    pa.int64(): "long",
    pa.uint8(): "integer",
    pa.uint16(): "integer",
    pa.uint32(): "long",
    pa.uint64(): "long",
    pa.float32(): "float",
    pa.float64(): "double",
}


def _has_nulls(metadata: pq.FileMetaData, column: int) -> bool:
    """From the row groups' statistics; a column without statistics may hold nulls."""
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        if stats is None or not stats.has_null_count or stats.null_count:
            return True
    return False


class ParquetSplit(Dataset):
    """One ingested split as MLflow sees it: source path, version digest, schema, row count."""

    def __init__(self, path: str | Path, name: str, digest: str | None = None) -> None:
        self._path = Path(path)
        metadata = pq.read_metadata(self._path)
        arrow = metadata.schema.to_arrow_schema()
        self._schema = Schema(
            [
                ColSpec(
                    _MLFLOW_TYPES.get(field.type, "string"), field.name, required=not _has_nulls(metadata, i)
                )  # type: ignore[arg-type]
                for i, field in enumerate(arrow)  # ingested splits are flat: field i is leaf column i
            ]
        )
        self._profile = {"num_rows": metadata.num_rows, "num_elements": metadata.num_rows * len(arrow)}
        with warnings.catch_warnings():  # a local path matches two equivalent local sources; either is right
            warnings.simplefilter("ignore", UserWarning)
            source = resolve_dataset_source(str(self._path))
        super().__init__(source=source, name=name, digest=digest)

    def _compute_digest(self) -> str:
        """Without an ingest version: a hash of the footer (schema, row groups, sizes), no rows read."""
        import hashlib

        return hashlib.sha256(pq.read_metadata(self._path).to_dict().__repr__().encode()).hexdigest()[:36]

    @property
    def schema(self) -> Schema:
        return self._schema

    @property
    def profile(self) -> dict[str, Any]:
        return self._profile

    def to_dict(self) -> dict[str, str]:
        return {
            **super().to_dict(),
            "schema": json.dumps({"mlflow_colspec": self._schema.to_dict()}),
            "profile": json.dumps(self._profile),
        }
