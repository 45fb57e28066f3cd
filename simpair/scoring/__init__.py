"""Nightly bulk scoring of Parquet pair batches: exactly once, streamed, quarantined, pinned to one model.

This package is the exactly-once ledger pipeline; how the model is loaded and run (backends,
precision and the int8 guard, the embedding store) is `simpair.runtime`'s. Pieces, one job each (none
imports Prefect; `tasks/scoring.py` and `flows/nightly_score.py` wire them):

- `options`: `ScoringOptions`, every setting of a run in one typed object with one set of defaults
  (the runtime ones are `simpair.runtime.RuntimeOptions`').
- `contract`: the scoring-input contract (`data_contracts/scoring_input.yaml`).
- `inbox`: list batches at any fsspec URL and hash their content (the exactly-once key).
- `ledger`: SQLite ledger of files and chunks under the output location; `records`: its tables and
  rows; `lock`: the run lock (one run per output at a time).
- `reader`: stream one chunk of a batch and validate its rows (good rows vs. rejects).
- `scorer`: score a chunk with the pinned model (the output columns).
- `writer`: atomic chunk parts, then one date-partitioned output (and rejects) file per batch.
- `plan`: hash inbox files, decide each file's fate, claim the work (`hash_file`, `plan_files`).
- `chunk`: score one chunk and record it (`score_chunk`).
- `commit`: merge a file's chunks into its output, or quarantine it (`finalize_file`).
- `summary`: the run summary (`ScoreSummary`, `summarize`, markdown).
- `run`: the scoring DAG, defined once (`run_scoring`), and `score_inbox(...)`, which runs it here.
- `rescore`: whether batches another model version scored are scored again (`decide_rescore`).
- `sample`: an inbox built from held-out test pairs (`simpair make-sample-inbox`).

The model is pinned by `simpair.runtime.model_ref.resolve_model_ref` (a folder or a registry reference).
"""

from simpair.scoring.options import ScoringOptions
from simpair.scoring.run import score_inbox
from simpair.scoring.summary import ScoreSummary

__all__ = ["ScoreSummary", "ScoringOptions", "score_inbox"]
