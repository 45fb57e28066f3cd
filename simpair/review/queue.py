"""Which scored pairs a person should label tonight: the review queue's selection rule, as a pure function.

Three queues, drawn from the night's scored traffic in this order:

1. `random`: a uniform random sample of the eligible pairs, drawn first and without looking at any
   score, so the labels it gets are an unbiased estimate of accuracy on the traffic (the `traffic`
   evaluation split). The draw is reproducible: seeded by the policy's `seed` and the run id.
2. `uncertain`: the pairs whose champion score lies nearest its threshold (`|score - threshold|`
   smallest first). For a cascade, only pairs inside its band are candidates: scoring's output says
   which with `scored_by == "cross"` (pass it as the `in_band` column), or give `band=(low, high)` on
   the score itself.
3. `disputed`: when a challenger scored the same pairs (`challenger_scores`, aligned with `scored`,
   null where it did not score), the pairs where champion and challenger fall on different sides of
   their own thresholds, the widest disagreement first.

A pair is chosen once: for one night across the three queues, and across nights through the pairs
already queued (`seen_keys`, kept by `simpair.review.store.SeenStore`). Its identity is `review_key`:
the texts cleaned as ingest cleans them (`simpair.ingest.clean.clean_text`), then the order-insensitive
`simpair.pairs.pair_key` that leakage and duplicates use, so a queued pair is the same pair the
`reviews` dataset and the leakage report will see. That key is also the queue's `pair_id`.

API (used by scoring's `write-review-queue` step and by the nightly loop benchmark):

    select_for_review(scored, threshold, policy, seen_keys, challenger_scores=None,
                      band=None, challenger_threshold=None, run_id=None) -> pl.DataFrame

`scored` needs `text_a`, `text_b`, `score`; optional `in_band` (bool), `pair_id` (the caller's key,
kept as `source_pair_id`), `model_name`, `model_version`, `run_id`. The result has `QUEUE_COLUMNS`:
pair_id, text_a, text_b, score, queue, model, version, run_id, then challenger_score, source_pair_id
and rank (order within its queue, from 0). Texts stay as the traffic wrote them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

from simpair.ingest.clean import CleanStats, clean_text
from simpair.pairs import pair_keys

QueueName = Literal["uncertain", "disputed", "random"]
QUEUES: tuple[QueueName, ...] = ("random", "uncertain", "disputed")  # the order they are drawn in
QUEUE_COLUMNS = [
    "pair_id",
    "text_a",
    "text_b",
    "score",
    "queue",
    "model",
    "version",
    "run_id",
    "challenger_score",
    "source_pair_id",
    "rank",
]
QUEUE_SCHEMA = {
    "pair_id": pl.Utf8,
    "text_a": pl.Utf8,
    "text_b": pl.Utf8,
    "score": pl.Float32,
    "queue": pl.Utf8,
    "model": pl.Utf8,
    "version": pl.Utf8,
    "run_id": pl.Utf8,
    "challenger_score": pl.Float32,
    "source_pair_id": pl.Utf8,
    "rank": pl.Int32,
}


class ReviewPolicy(BaseModel):
    """The nightly profile's `review:` block: how many pairs each queue gets per scoring run.

    Sizes are per scoring run (a night's traffic); 0 turns a queue off. `challenger` names the
    registry alias whose model scores the night's pairs for the `disputed` queue (null: no disputed
    queue); it scores at most `disputed_pool` pairs, drawn at random among the night's, so a large
    night does not pay a second full scoring pass.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    uncertain: NonNegativeInt = Field(
        200, description="pairs nearest the champion's threshold (or in its band)"
    )
    disputed: NonNegativeInt = Field(100, description="pairs where challenger and champion disagree")
    random: NonNegativeInt = Field(100, description="uniform sample of the traffic, never chosen by a model")
    seed: int = Field(0, description="seeds the random draws (with the run id, so each night draws anew)")
    challenger: str | None = Field(
        "challenger", description="registry alias of the model the disputed queue compares with; null: none"
    )
    disputed_pool: PositiveInt = Field(
        20_000, description="most pairs of a night the challenger scores for the disputed queue"
    )

    @property
    def total(self) -> int:
        return self.uncertain + self.disputed + self.random


def review_keys(text_a: pl.Series, text_b: pl.Series) -> pl.Series:
    """`review_key` of every row: each distinct text cleaned once, then `pair_keys` (sha1, sorted pair)."""
    texts = pl.concat([text_a.cast(pl.Utf8), text_b.cast(pl.Utf8)]).fill_null("").unique()
    stats = CleanStats()
    cleaned = pl.Series([clean_text(t, stats) for t in texts.to_list()], dtype=pl.Utf8)
    a = text_a.cast(pl.Utf8).fill_null("").replace_strict(texts, cleaned, return_dtype=pl.Utf8)
    b = text_b.cast(pl.Utf8).fill_null("").replace_strict(texts, cleaned, return_dtype=pl.Utf8)
    frame = pl.DataFrame({"a": a, "b": b}).select(
        pl.min_horizontal("a", "b").alias("lo"), pl.max_horizontal("a", "b").alias("hi")
    )
    return pair_keys(frame["lo"], frame["hi"]).alias("pair_id")


def review_key(text_a: str, text_b: str) -> str:
    """One pair's key (see `review_keys`)."""
    return review_keys(pl.Series([text_a]), pl.Series([text_b]))[0]


def draw_seed(seed: int, run_id: str | None) -> int:
    """The random queue's seed: the policy's, mixed with the run id so two nights draw differently."""
    digest = hashlib.sha256(f"{seed}\x00{run_id or ''}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _column(scored: pl.DataFrame, name: str, default: str | None) -> pl.Expr:
    return pl.col(name).cast(pl.Utf8) if name in scored.columns else pl.lit(default, dtype=pl.Utf8)


def _candidates(
    scored: pl.DataFrame,
    seen_keys: Iterable[str],
    challenger_scores: pl.Series | np.ndarray | None,
    run_id: str | None,
) -> pl.DataFrame:
    """One row per distinct unseen pair with text (its first occurrence), keyed, in traffic order."""
    challenger = (
        pl.Series("challenger_score", challenger_scores, dtype=pl.Float32)
        if challenger_scores is not None
        else pl.Series("challenger_score", [None] * scored.height, dtype=pl.Float32)
    )
    if len(challenger) != scored.height:
        raise ValueError(f"challenger_scores has {len(challenger)} values for {scored.height} scored rows")
    has_band = "in_band" in scored.columns
    in_band = pl.col("in_band").cast(pl.Boolean) if has_band else pl.lit(None, pl.Boolean)
    frame = scored.select(
        pl.col("text_a").cast(pl.Utf8),
        pl.col("text_b").cast(pl.Utf8),
        pl.col("score").cast(pl.Float32),
        _column(scored, "model_name", None).alias("model"),
        _column(scored, "model_version", None).alias("version"),
        (pl.lit(run_id, dtype=pl.Utf8) if run_id else _column(scored, "run_id", None)).alias("run_id"),
        _column(scored, "pair_id", None).alias("source_pair_id"),
        in_band.alias("in_band"),
    ).with_columns(challenger.fill_nan(None))
    usable = (
        pl.col("text_a").is_not_null()
        & pl.col("text_b").is_not_null()
        & (pl.col("text_a").str.strip_chars() != "")
        & (pl.col("text_b").str.strip_chars() != "")
        & pl.col("score").is_not_null()
        & pl.col("score").is_not_nan()
    )
    frame = frame.filter(usable)
    frame = frame.with_columns(review_keys(frame["text_a"], frame["text_b"]))
    seen = pl.Series("seen", list(seen_keys), dtype=pl.Utf8)
    unseen = frame.filter(~pl.col("pair_id").is_in(seen.implode()))
    return unseen.unique("pair_id", keep="first", maintain_order=True)


def select_for_review(
    scored: pl.DataFrame,
    threshold: float,
    policy: ReviewPolicy,
    seen_keys: Iterable[str],
    challenger_scores: pl.Series | np.ndarray | None = None,
    band: tuple[float, float] | None = None,
    challenger_threshold: float | None = None,
    run_id: str | None = None,
) -> pl.DataFrame:
    """Tonight's review queue (see the module docstring): random first, then uncertain, then disputed.

    `threshold` is the champion's decision threshold (0.5 for a model without one); `band` limits the
    uncertain queue to `low <= score <= high` (an `in_band` column in `scored` does the same per row);
    `challenger_threshold` defaults to `threshold`. A queue may come out shorter than its size when
    the night has too few eligible pairs; none is ever padded with pairs of another queue's rule.
    """
    if not policy.enabled or policy.total == 0 or scored.height == 0:
        return pl.DataFrame(schema=QUEUE_SCHEMA)
    pool = _candidates(scored, seen_keys, challenger_scores, run_id).with_row_index("pos")
    parts: list[pl.DataFrame] = []

    rng = np.random.default_rng(draw_seed(policy.seed, run_id))
    n_random = min(policy.random, pool.height)
    drawn = np.sort(rng.choice(pool.height, size=n_random, replace=False)) if n_random else np.array([], int)
    parts.append(pool[drawn].with_columns(pl.lit("random").alias("queue")))
    taken = pl.Series("pos", drawn, dtype=pl.UInt32)
    rest = pool.filter(~pl.col("pos").is_in(taken.implode()))

    inside = pl.col("in_band").fill_null(True)
    if band is not None:
        inside = inside & pl.col("score").is_between(band[0], band[1])
    uncertain = (
        rest.filter(inside)
        .with_columns((pl.col("score") - threshold).abs().alias("_distance"))
        .sort(["_distance", "pair_id"])
        .head(policy.uncertain)
        .drop("_distance")
        .with_columns(pl.lit("uncertain").alias("queue"))
    )
    parts.append(uncertain)
    rest = rest.filter(~pl.col("pos").is_in(uncertain["pos"].implode()))

    if policy.disputed and rest["challenger_score"].is_not_null().any():
        other = threshold if challenger_threshold is None else challenger_threshold
        disputed = (
            rest.filter(
                pl.col("challenger_score").is_not_null()
                & ((pl.col("score") >= threshold) != (pl.col("challenger_score") >= other))
            )
            .with_columns((pl.col("score") - pl.col("challenger_score")).abs().alias("_gap"))
            .sort(["_gap", "pair_id"], descending=[True, False])
            .head(policy.disputed)
            .drop("_gap")
            .with_columns(pl.lit("disputed").alias("queue"))
        )
        parts.append(disputed)

    queue = pl.concat(parts).with_columns(pl.int_range(pl.len()).over("queue").cast(pl.Int32).alias("rank"))
    return queue.select(QUEUE_COLUMNS).cast(QUEUE_SCHEMA)  # type: ignore[arg-type]
