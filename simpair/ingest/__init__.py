"""Lossless ingest of raw TSV/CSV pair datasets into versioned Parquet, driven by data contracts."""

from simpair.ingest.pipeline import load_contracts, run_ingest
from simpair.ingest.report import DatasetReport, IngestReport, LeakageReport

__all__ = ["DatasetReport", "IngestReport", "LeakageReport", "load_contracts", "run_ingest"]
