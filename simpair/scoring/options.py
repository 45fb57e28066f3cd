"""The scoring options, typed once: what `simpair score`, the flow, its tasks and `score_inbox` accept.

One frozen object carries every setting of a run from the command line (or Python) to each stage,
with one set of defaults (documented in docs/scoring.md). How the model runs (batch size, threads,
backend, embedding store) is `simpair.runtime.RuntimeOptions`, which this object extends; chunks get
only that part and the run's resolved precision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import NonNegativeFloat, NonNegativeInt, PositiveInt, model_validator

from simpair.defaults import DEFAULT_CHUNK_ROWS
from simpair.monitoring.policy import MonitorPolicy
from simpair.review.queue import ReviewPolicy
from simpair.runtime.options import RuntimeOptions


class ScoringOptions(RuntimeOptions):
    """How to score an inbox (where from and where to are the run's arguments, not options).

    The runtime fields (`batch_size`, `threads`, `backend`, `precision`, `embedding_store`,
    `embedding_cache`, `embedding_memory_mb`) are `RuntimeOptions`'; a store with no
    `embedding_cache` lives in `<out>/_ledger/embeddings/` and is removed when the run finishes.
    Scoring adds:

    - `model`: `name@alias`, `name/version` or a saved model folder; None = the paraphrase champion.
    - `home`: pipeline home holding the MLflow registry; None = `$SIMPAIR_HOME`.
    - `chunk_rows`: rows per chunk, the unit of resume and fan-out.
    - `lock_wait`: seconds to wait for another run holding the output; 0 = give up at once.
    - `contract`: the scoring-input contract file; None = `data_contracts/scoring_input.yaml`.
    - `rescore`: also score batches that another model version already scored (each version once;
      the other versions' outputs stay), see `simpair.scoring.rescore`.
    - `rescore_days`: with `rescore`, only batches first claimed at most this many days ago.
    - `rescore_days_after_promotion`: when the pinned version differs from the one the last finished
      run on this output used, re-score the batches of the last N days; 0 = off.
    - `monitor`: the drift and health checks (the nightly profile's `monitor:` block). None, the
      Python default, checks nothing; `simpair score` sets it (on unless `--no-monitor`) and the
      `nightly-score` flow takes its profile's block, so the product's runs are monitored by default.
    - `review`: the review queue the run ends by writing (`simpair.review.write`); None = no queue.
    """

    model: str | None = None
    home: Path | None = None
    chunk_rows: PositiveInt = DEFAULT_CHUNK_ROWS
    lock_wait: NonNegativeFloat = 0.0
    contract: Path | None = None
    rescore: bool = False
    rescore_days: NonNegativeInt | None = None
    rescore_days_after_promotion: NonNegativeInt = 0
    review: ReviewPolicy | None = None
    monitor: MonitorPolicy | None = None

    @property
    def monitored(self) -> bool:
        """Whether the run profiles its traffic and checks it for drift."""
        return self.monitor is not None and self.monitor.enabled

    @model_validator(mode="after")
    def _rescore_days_need_rescore(self) -> ScoringOptions:
        if self.rescore_days is not None and not self.rescore:
            raise ValueError("rescore_days limits a re-score: it needs rescore on")
        return self

    @classmethod
    def build(cls, base: ScoringOptions | None = None, /, **changes: Any) -> ScoringOptions:
        """`base` (default: all defaults) with the given fields changed; a None change keeps base's value.

        For the Python entry points (`score_inbox`, the flow's `run`) that take fields as keywords.
        """
        fields = dict(base or cls()) | {k: v for k, v in changes.items() if v is not None}
        return cls(**fields)
