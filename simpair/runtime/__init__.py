"""The model runtime: how a pinned model is loaded and run, for `simpair score`, `mine` and `encode`.

Apart from the scoring ledger on purpose: mining and encoding run the same models the same way, and
nothing here knows about inboxes, chunks or ledgers. No Prefect here. Pieces, one job each:

- `options`: `RuntimeOptions`, the six settings of how a model runs (batch size, threads, backend,
  embedding store on/off, its folder kept across runs, its memory bound), checked once.
- `precision`: the backend and precision names and their checks; `resolve`: the one place a run's
  precision is decided, from what is stored (auto from the model's verdict, bf16 only where native,
  int8 only with a stored check that accepted it); nothing is measured here.
- `loader`: the one loader, from a model folder or a pinned `ModelRef` to a predictor of any kind
  (`load_predictor`; with a backend, once per process with the asked forward pass; `load_for_run` in a
  run's stages). `recheck`: fp32 near the threshold for a fast rung accepted that way.
- `onnx_backend`, `bf16_backend`, `budget`: the forward passes behind `--backend onnx` (and `auto`
  on CPU) and `--precision bf16`, with token-budget batches.
- `int8_backend`: the `--precision int8` graph (the verdicts saying whether a model may use it are
  measured in `simpair.selection`: `precision_ladder`, `int8_guard`).
- `stacked`, `cascade`, `stack_features`: the composite predictors the loader builds from members;
  `model_ref`: a folder or registry reference pinned once; `pyfunc_model`: the served MLflow model.
- `embedding_store`: bi-encoder sentence vectors kept for a whole run (or across nights), so each
  distinct sentence is encoded once; `stored_predict`: scores and vectors through that store.

Only this package imports an inference backend (ONNX Runtime); `tests/test_layout.py` checks it.
"""

from simpair.runtime.options import RuntimeOptions

__all__ = ["RuntimeOptions"]
