"""Nightly bulk scoring of Parquet pair batches: exactly once, streamed, quarantined, pinned to one model.

Pieces, one job each (none imports Prefect; `tasks/scoring.py` and `flows/nightly_score.py` wire them):

- `options`: `ScoringOptions`, every setting of a run in one typed object with one set of defaults.
- `contract`: the scoring-input contract (`data_contracts/scoring_input.yaml`).
- `inbox`: list batches at any fsspec URL and hash their content (the exactly-once key).
- `ledger`: SQLite ledger of files and chunks under the output location, plus the run lock.
- `reader`: stream one chunk of a batch and validate its rows (good rows vs. rejects).
- `scorer`: score a chunk with the pinned model.
- `writer`: atomic chunk parts, then one date-partitioned output (and rejects) file per batch.
- `plan`: hash inbox files, decide each file's fate, claim the work (`hash_file`, `plan_files`).
- `chunk`: score one chunk and record it (`score_chunk`).
- `commit`: merge a file's chunks into its output, or quarantine it (`finalize_file`).
- `summary`: the run summary (`ScoreSummary`, `summarize`, markdown).
- `run`: the scoring DAG, defined once (`run_scoring`), and `score_inbox(...)`, which runs it here.
- `onnx_backend`, `bf16_backend`, `budget`: the forward passes behind `--backend onnx` / `--precision bf16`.
- `int8_backend`, `int8_guard`: the opt-in `--precision int8` graph and the dev-split parity check
  that must pass before a model version may score in int8.
- `embedding_store`: bi-encoder sentence vectors kept for a whole run (or across nights), so each
  distinct sentence is encoded once.

The model is pinned by `simpair.model_ref.resolve_model_ref` (a folder or a registry reference).
"""

from simpair.scoring.options import ScoringOptions
from simpair.scoring.run import score_inbox
from simpair.scoring.summary import ScoreSummary

__all__ = ["ScoreSummary", "ScoringOptions", "score_inbox"]
