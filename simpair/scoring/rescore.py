"""Re-scoring with another model version: which batches already scored this run scores again.

The ledger keys scorings by (batch, model name, model version), so exactly-once holds per version: a
run never scores a batch twice with the same version. A batch that another version already scored is
skipped, as always, unless the run is told to score it again:

- `rescore` (`simpair score --rescore`, the `nightly-score` flow's `rescore` parameter): every such
  batch, or with `rescore_days` only those first claimed at most that many days ago;
- `rescore_days_after_promotion` N > 0 (the nightly profile's `scoring.rescore_days_after_promotion`):
  when the pinned version differs from the one the last finished run on this output scored with (a
  promotion, or a rollback, happened in between), the batches first claimed in the last N days.

The decision is taken once per run, right after the model is pinned, like the precision. The
promotion test reads only the ledger of the output location, so a crashed re-scoring run is taken
up again by the next run, and a run after a finished one finds nothing left to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from simpair.runtime.model_ref import ModelRef
from simpair.scoring.ledger import Ledger
from simpair.scoring.options import ScoringOptions
from simpair.stages import step


@dataclass(frozen=True)
class Rescore:
    """This run scores again the batches another model version scored, first claimed on or after `since`.

    `since` is an ISO day (None: every batch); `why` says what asked for it (summary, artifact).
    """

    since: str | None
    why: str

    def covers(self, day: str | None) -> bool:
        """Whether a batch first claimed on `day` is in the window (a batch with no day only without one)."""
        return self.since is None or (day is not None and day >= self.since)

    @property
    def note(self) -> str:
        window = "every batch" if self.since is None else f"batches first claimed since {self.since}"
        return f"{window} scored by another version is scored again ({self.why})"


def _since(days: int | None, today: date) -> str | None:
    return None if days is None else (today - timedelta(days=days)).isoformat()


@step("decide-rescore")
def decide_rescore(
    out: Path, model: ModelRef, options: ScoringOptions, today: date | None = None
) -> Rescore | None:
    """The run's re-scoring window, or None when it scores new batches only (see the module doc)."""
    today = today or datetime.now(UTC).date()
    if options.rescore:
        return Rescore(_since(options.rescore_days, today), "asked for")
    days = options.rescore_days_after_promotion
    if days <= 0:
        return None
    previous = Ledger(out).last_finished_version(model.name)
    if previous is None or previous == model.version:
        return None
    return Rescore(
        _since(days, today),
        f"{model.name} version {model.version} follows version {previous}: "
        f"last {days} day(s) after a promotion",
    )
