"""Nightly bulk scoring of Parquet pair batches: exactly once, streamed, quarantined, pinned to one model.

Pieces, one job each (none imports Prefect; `tasks/scoring.py` and `flows/nightly_score.py` wire them):

- `contract`: the scoring-input contract (`data_contracts/scoring_input.yaml`).
- `inbox`: list batches at any fsspec URL and hash their content (the exactly-once key).
- `ledger`: SQLite ledger of files and chunks under the output location, plus the run lock.
- `reader`: stream one chunk of a batch and validate its rows (good rows vs. rejects).
- `scorer`: score a chunk with the pinned model.
- `writer`: atomic chunk parts, then one date-partitioned output (and rejects) file per batch.
- `model_ref`: resolve `--model` once per run to a pinned (name, version, directory).
- `run`: `score_inbox(...)`, the sequential entry point, built from the same steps the flow maps.
- `onnx_backend`: `--backend onnx`, the forward pass in ONNX Runtime (verified against torch).
"""

from simpair.scoring.run import ScoreSummary, score_inbox

__all__ = ["ScoreSummary", "score_inbox"]
