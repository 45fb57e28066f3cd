"""Unlabeled pairs like the traffic, for fitting a cascade's band beside its dev split.

The band needs only the cross-encoder's decisions, not gold labels. So pairs from the batches a cascade
will score (an inbox, last month's batches) can join dev in the fit, and its promise (at most
`max_disagreement` of decisions differ from the cross-encoder's) then holds on pairs like those, not only
on pairs like dev's. On MSRP + STS-B batches a band fitted on MSRP dev alone left 0.2-1.5% of decisions
differing; fitted on dev plus 8,192 such pairs, 0.2% on fresh batches (docs/experiments.md, 2026-11-27).
Never pairs of an evaluation split: the promotion gate measures that disagreement there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from simpair.pair_files import read_pairs_file

POOL_SUFFIXES = (".parquet", ".pq", ".csv", ".tsv", ".tab")
DEFAULT_POOL_PAIRS = 4096


class BandPoolRef(BaseModel):
    """`band_pool:` in a cascade config: where the pairs are, and how many to draw.

    `path`: a local Parquet, CSV or TSV file with text_a and text_b columns, or a folder of them (an
    inbox: names starting with `.` or `_` are skipped, as scoring does). Relative to the config file.
    """

    model_config = ConfigDict(extra="forbid")

    path: str
    pairs: int = Field(default=DEFAULT_POOL_PAIRS, ge=1)  # drawn at random when there are more
    seed: int = 0


@dataclass(frozen=True)
class BandPool:
    source: str
    text_a: list[str]
    text_b: list[str]

    def __len__(self) -> int:
        return len(self.text_a)

    def without(self, pairs: set[tuple[str, str]]) -> BandPool:
        """The pool less `pairs` (dev's: each pair is counted once in the fit)."""
        kept = [(a, b) for a, b in zip(self.text_a, self.text_b, strict=True) if (a, b) not in pairs]
        return BandPool(self.source, [a for a, _ in kept], [b for _, b in kept])


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        hidden = (".", "_")
        return sorted(
            p for p in path.rglob("*")
            if p.is_file() and p.suffix.lower() in POOL_SUFFIXES
            and not any(part.startswith(hidden) for part in p.relative_to(path).parts)
        )  # fmt: skip
    raise ValueError(f"{path}: no such file or folder for the band pool")


def _read(path: Path) -> pl.DataFrame:
    frame = read_pairs_file(path)  # one error naming the file for anything polars cannot read
    missing = {"text_a", "text_b"} - set(frame.columns)
    if missing:
        raise ValueError(f"{path}: a band pool needs columns text_a and text_b (missing: {sorted(missing)})")
    return frame.select(pl.col("text_a").cast(pl.String), pl.col("text_b").cast(pl.String))


def read_pool(ref: BandPoolRef) -> BandPool:
    """`ref.pairs` distinct pairs with both texts present, drawn with `ref.seed` (all of them when fewer).

    Raises ValueError naming the file or folder when there is nothing usable."""
    source = Path(ref.path).expanduser()
    files = _files(source)
    if not files:
        raise ValueError(f"{source}: no Parquet, CSV or TSV files for the band pool")
    frame = (
        pl.concat([_read(f) for f in files])
        .drop_nulls()
        .filter((pl.col("text_a").str.strip_chars() != "") & (pl.col("text_b").str.strip_chars() != ""))
        .unique(maintain_order=True)
    )
    if frame.height == 0:
        raise ValueError(f"{source}: the band pool has no pair with both texts")
    if frame.height > ref.pairs:
        frame = frame.sample(ref.pairs, seed=ref.seed)
    return BandPool(str(source), frame["text_a"].to_list(), frame["text_b"].to_list())
