"""Unlabeled pairs like the traffic, for fitting a cascade's band beside its dev split.

The band needs only the cross-encoder's decisions, not gold labels. So pairs from the batches a cascade
will score (an inbox, last month's batches) can join dev in the fit, and its promise (at most
`max_disagreement` of decisions differ from the cross-encoder's) then holds on pairs like those, not only
on pairs like dev's. On MSRP + STS-B batches a band fitted on MSRP dev alone left 0.2-1.5% of decisions
differing; fitted on dev plus 8,192 such pairs, 0.2% on fresh batches (docs/experiments.md, 2026-11-27).

A pool can also be a split of the catalog (`split: msrp/train`): the cross-encoder's own training pairs
are pairs like the traffic when the traffic is like the training data. On MSRP they widened the band
fitted on 408 dev pairs enough that test decisions differing from the cross-encoder's fell from 1.16%
to 0.23-0.70% (docs/experiments.md, 2026-11-27). Never an evaluation split: the promotion gate
measures that disagreement there, so a test split (by its role in the contract) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from simpair.catalog import Catalog
from simpair.pair_files import read_pairs_file

POOL_SUFFIXES = (".parquet", ".pq", ".csv", ".tsv", ".tab")
DEFAULT_POOL_PAIRS = 4096


class BandPoolRef(BaseModel):
    """`band_pool:` in a cascade config: where the pairs are, and how many to draw.

    `path`: a local Parquet, CSV or TSV file with text_a and text_b columns, or a folder of them (an
    inbox: names starting with `.` or `_` are skipped, as scoring does). Relative to the config file.
    `split`: or DATASET/SPLIT, a train or dev split of the catalog (its current version).
    """

    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    split: str | None = None
    pairs: int = Field(default=DEFAULT_POOL_PAIRS, ge=1)  # drawn at random when there are more
    seed: int = 0

    @model_validator(mode="after")
    def _one_source(self) -> BandPoolRef:
        if (self.path is None) == (self.split is None):
            raise ValueError("band_pool takes one of path (a file or folder) and split (DATASET/SPLIT)")
        if self.split is not None and len(self.split.split("/")) != 2:
            raise ValueError(f"band_pool split {self.split!r}: expected DATASET/SPLIT, e.g. msrp/train")
        return self

    def dataset_split(self) -> tuple[str, str]:
        assert self.split is not None
        dataset, split = self.split.split("/")
        return dataset, split

    def check_split(self, home: Path) -> str:
        """The split's current version; fails (ValueError) when it is not ingested or is a test split."""
        dataset, split = self.dataset_split()
        catalog = Catalog(home)
        try:
            version = catalog.current_version(dataset)
            roles = {s["split"]: s["role"] for s in catalog.manifest(dataset, version)["splits"]}
        except (LookupError, OSError, KeyError) as exc:
            raise ValueError(f"band_pool split {self.split}: {exc}") from exc
        if split not in roles:
            raise ValueError(f"band_pool split {self.split}: dataset {dataset!r} has splits {sorted(roles)}")
        if roles[split] == "test":
            raise ValueError(
                f"band_pool split {self.split} is a test split: the gate measures the cascade's "
                "disagreement there, so it cannot also fit the band"
            )
        return version


@dataclass(frozen=True)
class BandPool:
    source: str
    text_a: list[str]
    text_b: list[str]
    # a split pool: (dataset, split, version) and each pair's id, so the pairs count as training data
    # for leakage as dev's do; None for a file or folder
    origin: tuple[str, str, str] | None = None
    pair_ids: list[str] | None = None

    def __len__(self) -> int:
        return len(self.text_a)

    def without(self, pairs: set[tuple[str, str]]) -> BandPool:
        """The pool less `pairs` (dev's: each pair is counted once in the fit)."""
        keep = [(a, b) not in pairs for a, b in zip(self.text_a, self.text_b, strict=True)]

        def kept(values: list[str]) -> list[str]:
            return [v for v, k in zip(values, keep, strict=True) if k]

        ids = None if self.pair_ids is None else kept(self.pair_ids)
        return BandPool(self.source, kept(self.text_a), kept(self.text_b), self.origin, ids)


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


def read_pool(ref: BandPoolRef, home: Path | None = None) -> BandPool:
    """`ref.pairs` distinct pairs with both texts present, drawn with `ref.seed` (all of them when fewer).

    A split pool is read from the catalog under `home`, and named `DATASET/SPLIT@VERSION`. Raises
    ValueError naming the file, folder or split when there is nothing usable."""
    if ref.split is not None:
        if home is None:
            raise ValueError(f"band_pool split {ref.split}: reading a split needs the pipeline home")
        version = ref.check_split(home)
        dataset, split = ref.dataset_split()
        try:
            frame = Catalog(home).read_split(dataset, split, version).select("pair_id", "text_a", "text_b")
        except (LookupError, OSError) as exc:
            raise ValueError(f"band_pool split {ref.split}: {exc}") from exc
        source = f"{ref.split}@{version}"
        drawn = _draw(frame, ref, source)
        texts = drawn["text_a"].to_list(), drawn["text_b"].to_list()
        return BandPool(source, *texts, (dataset, split, version), drawn["pair_id"].to_list())
    assert ref.path is not None
    source = Path(ref.path).expanduser()
    files = _files(source)
    if not files:
        raise ValueError(f"{source}: no Parquet, CSV or TSV files for the band pool")
    drawn = _draw(pl.concat([_read(f) for f in files]), ref, str(source))
    return BandPool(str(source), drawn["text_a"].to_list(), drawn["text_b"].to_list())


def _draw(pairs: pl.DataFrame, ref: BandPoolRef, source: str) -> pl.DataFrame:
    """Distinct pairs with both texts present, `ref.pairs` of them drawn with `ref.seed` (all when fewer).

    The draw comes before dev's pairs are dropped from it (`BandPool.without`): a pool drawn from the
    split dev was carved from loses about dev's share of it."""
    frame = (
        pairs.drop_nulls(["text_a", "text_b"])
        .filter((pl.col("text_a").str.strip_chars() != "") & (pl.col("text_b").str.strip_chars() != ""))
        .unique(["text_a", "text_b"], keep="first", maintain_order=True)
    )
    if frame.height == 0:
        raise ValueError(f"{source}: the band pool has no pair with both texts")
    return frame.sample(ref.pairs, seed=ref.seed) if frame.height > ref.pairs else frame
