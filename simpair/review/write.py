"""The `write-review-queue` step: a finished scoring run's outputs become tonight's review queue.

Scoring's DAG (`simpair.scoring.run.run_scoring`) ends with this step when its options carry a
`ReviewPolicy` (the nightly profile's `review:` block). It reads the run's scored output files by
column name (`text_a`, `text_b`, `score`, `probability`, `scored_by`, `pair_id`, `model_name`,
`model_version`, `run_id`), so it needs nothing of the scoring package, and writes under the output:

    <out>/_review/<run_id>/queue.parquet   `simpair.review.queue.QUEUE_COLUMNS`
    <out>/_review/<run_id>/tasks.json      Label Studio's task import JSON
    <out>/_review/seen.parquet             the pairs now queued, so no later run queues them again

The champion's threshold is the one stored with the model (0.5 when it has none). For a cascade the
uncertain queue keeps to pairs inside its band, which scoring marks `scored_by == "cross"`. The
disputed queue needs a challenger: `policy.challenger` is a registry alias of the champion's name (or
a full model spec); it scores at most `policy.disputed_pool` of the night's pairs, drawn at random. A
challenger that cannot be resolved or loaded leaves the disputed queue empty and says why in `note`;
the other two queues are still written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from simpair.atomic import atomic_path
from simpair.review.labelstudio import write_tasks
from simpair.review.queue import ReviewPolicy, draw_seed, select_for_review
from simpair.review.store import SeenStore, queue_dir
from simpair.runtime.model_ref import ModelRef
from simpair.stages import step

log = logging.getLogger(__name__)

# Columns of a scored output this step reads, when present (the texts and `score` must be).
READ_COLUMNS = (
    "text_a",
    "text_b",
    "score",
    "probability",
    "scored_by",
    "pair_id",
    "model_name",
    "model_version",
)


@dataclass
class ReviewQueueResult:
    """What the step wrote (nothing when `queue_path` is None; `note` says why)."""

    run_id: str
    queue_path: str | None = None
    tasks_path: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    rows_read: int = 0
    note: str | None = None

    def headline(self) -> str:
        if self.queue_path is None:
            return f"review queue: none ({self.note})"
        parts = ", ".join(f"{n} {q}" for q, n in self.counts.items())
        return f"review queue: {parts} of {self.rows_read} scored rows -> {self.queue_path}" + (
            f" ({self.note})" if self.note else ""
        )


def read_scored(outputs: list[str]) -> pl.DataFrame:
    """The run's scored rows (the columns this step reads), all output files in order."""
    frames = []
    for path in outputs:
        names = pl.read_parquet_schema(path)
        if not {"text_a", "text_b", "score"} <= set(names):
            raise ValueError(f"{path}: a scored output needs text_a, text_b and score (has {list(names)})")
        frames.append(pl.read_parquet(path, columns=[c for c in READ_COLUMNS if c in names]))
    if not frames:
        return pl.DataFrame(schema={"text_a": pl.Utf8, "text_b": pl.Utf8, "score": pl.Float32})
    frame = pl.concat(frames, how="diagonal_relaxed")
    if "probability" in frame.columns:  # a paraphrase model's threshold applies to its probability
        frame = frame.with_columns(pl.coalesce("probability", "score").alias("score"))
    return frame


def model_threshold(model_dir: str | Path) -> float:
    """The threshold stored with a model (0.5 when none was chosen or the folder says nothing)."""
    from simpair.models.metadata import ModelMetadata

    try:
        meta = ModelMetadata.read(Path(model_dir))
    except (OSError, ValueError):
        return 0.5
    return float(meta.threshold) if meta.threshold_chosen else 0.5


def challenger_scores(
    scored: pl.DataFrame, model: ModelRef, policy: ReviewPolicy, home: Path | None, run_id: str
) -> tuple[np.ndarray | None, float | None, str | None]:
    """(scores aligned with `scored`, NaN where not scored; the challenger's threshold; a note)."""
    if not policy.challenger or not policy.disputed or scored.height == 0:
        return None, None, None
    spec = policy.challenger
    if "@" not in spec and "/" not in spec:
        spec = f"{model.name}@{spec}"
    try:  # the disputed queue is optional: a missing or broken challenger must not cost the others
        from simpair import settings
        from simpair.runtime.loader import load_predictor
        from simpair.runtime.model_ref import resolve_model_ref

        challenger = resolve_model_ref(spec, settings.home_dir(home))
        if (challenger.name, challenger.version) == (model.name, model.version):
            return None, None, f"no disputed queue: {spec} is the champion itself"
        predictor = load_predictor(challenger)
    except Exception as exc:  # noqa: BLE001 - any failure of the challenger is reported in one line
        log.warning("review queue: challenger %s not used: %s", spec, exc)
        return None, None, f"no disputed queue: challenger {spec} not usable ({type(exc).__name__}: {exc})"
    rng = np.random.default_rng(draw_seed(policy.seed + 1, run_id))
    n = min(policy.disputed_pool, scored.height)
    rows = np.sort(rng.choice(scored.height, size=n, replace=False))
    pool = scored[rows]
    out = predictor.predict(pool["text_a"].cast(pl.Utf8).to_list(), pool["text_b"].cast(pl.Utf8).to_list())
    values = np.full(scored.height, np.nan, dtype=np.float32)
    values[rows] = out.get("probability", out["score"])
    return values, model_threshold(challenger.local_dir), None


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    with atomic_path(path, durable=True) as tmp:
        frame.write_parquet(tmp, compression="zstd")


@step("write-review-queue")
def write_review_queue(
    out: Path,
    run_id: str,
    model: ModelRef,
    outputs: list[str],
    policy: ReviewPolicy | None,
    home: Path | None = None,
) -> ReviewQueueResult:
    """Tonight's review queue from this run's scored `outputs` (see the module docstring)."""
    result = ReviewQueueResult(run_id=run_id)
    if policy is None or not policy.enabled:
        result.note = "no review policy" if policy is None else "review disabled"
        return result
    scored = read_scored(outputs)
    result.rows_read = scored.height
    if scored.height == 0:
        result.note = "no rows scored this run"
        return result
    if model.kind == "cascade" and "scored_by" in scored.columns:
        scored = scored.with_columns((pl.col("scored_by") == "cross").alias("in_band"))
    seen = SeenStore(out)
    challenger, challenger_threshold, result.note = challenger_scores(scored, model, policy, home, run_id)
    queue = select_for_review(
        scored,
        model_threshold(model.local_dir),
        policy,
        seen.keys(),
        challenger_scores=challenger,
        challenger_threshold=challenger_threshold,
        run_id=run_id,
    ).with_columns(pl.col("model").fill_null(model.name), pl.col("version").fill_null(model.version))
    folder = queue_dir(out, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    _write_parquet(queue, folder / "queue.parquet")
    write_tasks(queue, folder / "tasks.json")
    seen.add(queue, run_id)  # after the queue files: a crash between queues a pair again, never loses one
    result.queue_path = str(folder / "queue.parquet")
    result.tasks_path = str(folder / "tasks.json")
    counts = dict(queue.group_by("queue").len().iter_rows())
    result.counts = {q: int(counts.get(q, 0)) for q in ("uncertain", "disputed", "random")}
    log.info(result.headline())
    return result
