"""The model runtime: how a pinned model is loaded and run, for `simpair score`, `mine` and `encode`.

Apart from the scoring ledger on purpose: mining and encoding run the same models the same way, and
nothing here knows about inboxes, chunks or ledgers. No Prefect here. Pieces, one job each:

- `options`: `RuntimeOptions`, the six settings of how a model runs (batch size, threads, backend,
  embedding store on/off, its folder kept across runs, its memory bound), checked once.
- `precision`: the backend and precision names and their checks; `resolve`: the one place a run's
  precision is decided (auto from the model's verdict, bf16 only where native, int8 only past the guard).
- `loader`: the one loader, from a model folder or a pinned `ModelRef` to a predictor of any kind
  (`load_predictor`; with a backend, once per process with the asked forward pass; `load_for_run` in a
  run's stages). `recheck`: fp32 near the threshold for a fast rung accepted that way.
- `onnx_backend`, `bf16_backend`, `budget`: the forward passes behind `--backend onnx` (and `auto`
  on CPU) and `--precision bf16`, with token-budget batches.
- `int8_backend`, `int8_guard`: the `--precision int8` graph and the dev-split parity check that must
  pass before a model version may score in int8 explicitly.
- `precision_ladder`: fp32 -> bf16 -> int8 measured once per model on its dev split (flips, metric,
  largest score change, pairs/s); `--precision auto` scores in the fastest rung within the limits.
- `embedding_store`: bi-encoder sentence vectors kept for a whole run (or across nights), so each
  distinct sentence is encoded once; `stored_predict`: scores and vectors through that store.

Only this package imports an inference backend (ONNX Runtime); `tests/test_layout.py` checks it.
"""

from simpair.runtime.options import RuntimeOptions

__all__ = ["RuntimeOptions"]
