"""Where a scoring output keeps its review queues, and the pairs it has ever queued (so none twice).

Layout under a scoring output `<out>` (`_`-prefixed, so readers of `date=*/` never see it):

    _review/seen.parquet                 every pair ever queued: pair_id (the review key), queue, run_id
    _review/<run_id>/queue.parquet       that run's queue (`simpair.review.queue.QUEUE_COLUMNS`)
    _review/<run_id>/tasks.json          the same pairs as Label Studio tasks (`simpair.review.labelstudio`)

`seen.parquet` is rewritten atomically after the run's queue files are in place: a crash between the
two leaves a queue whose pairs may be queued again by the next run, never pairs remembered as queued
that no queue holds. The scoring run lock already keeps two runs on one output apart.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from simpair.atomic import atomic_path

SEEN_SCHEMA = {"pair_id": pl.Utf8, "queue": pl.Utf8, "run_id": pl.Utf8, "queued_at": pl.Utf8}


def review_root(out: Path) -> Path:
    """`<out>/_review`: every run's queue folder and the seen store."""
    return Path(out) / "_review"


def queue_dir(out: Path, run_id: str) -> Path:
    return review_root(out) / run_id


def queue_files(root: Path) -> list[Path]:
    """Every `queue.parquet` under a folder: one run's queue folder, `<out>/_review`, or `<out>` itself."""
    root = Path(root)
    if root.is_file():
        return [root]
    if (root / "queue.parquet").is_file():
        return [root / "queue.parquet"]
    base = root / "_review" if (root / "_review").is_dir() else root
    return sorted(base.glob("*/queue.parquet"))


def read_queues(root: Path) -> pl.DataFrame:
    """Every queued pair under `root` (see `queue_files`), one row per pair (a later run's copy wins)."""
    files = queue_files(root)
    if not files:
        raise FileNotFoundError(f"{root}: no review queue (queue.parquet) found")
    frames = [pl.read_parquet(f).with_columns(pl.lit(str(f)).alias("queue_file")) for f in files]
    return pl.concat(frames, how="diagonal_relaxed").unique("pair_id", keep="last", maintain_order=True)


class SeenStore:
    """The pairs a scoring output has ever put in a review queue (`<out>/_review/seen.parquet`)."""

    def __init__(self, out: Path) -> None:
        self.path = review_root(out) / "seen.parquet"

    def read(self) -> pl.DataFrame:
        if not self.path.is_file():
            return pl.DataFrame(schema=SEEN_SCHEMA)
        return pl.read_parquet(self.path)

    def keys(self) -> set[str]:
        return set(self.read()["pair_id"].to_list())

    def add(self, queue: pl.DataFrame, run_id: str) -> int:
        """Remember the queue's pairs as queued by `run_id`; returns how many were new."""
        old = self.read()
        now = datetime.now(UTC).isoformat(timespec="seconds")
        new = queue.select(
            "pair_id", "queue", pl.lit(run_id).alias("run_id"), pl.lit(now).alias("queued_at")
        ).filter(~pl.col("pair_id").is_in(old["pair_id"].implode()))
        if new.height == 0:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.path, durable=True) as tmp:
            pl.concat([old, new.cast(SEEN_SCHEMA)]).write_parquet(tmp, compression="zstd")  # type: ignore[arg-type]
        return new.height
