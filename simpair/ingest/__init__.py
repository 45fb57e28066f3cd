"""Lossless ingest of raw TSV/CSV pair datasets into versioned Parquet, driven by data contracts."""

from __future__ import annotations

from simpair.lazy import lazy_exports

# Loaded on first use, so a process that only parses chunks (a worker of `workers.py`) does not import
# the whole ingest stack.
_EXPORTS = {
    "load_contracts": "simpair.ingest.pipeline",
    "run_ingest": "simpair.ingest.pipeline",
    "DatasetReport": "simpair.ingest.report",
    "IngestReport": "simpair.ingest.report",
    "LeakageReport": "simpair.ingest.report",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
