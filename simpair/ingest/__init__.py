"""Lossless ingest of raw TSV/CSV pair datasets into versioned Parquet, driven by data contracts."""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
