"""A sample inbox built from the held-out test pairs, labels dropped, so `make run` can show scoring.

Only test-role splits are used: they are what the pipeline never trains on. Labels and scores are
removed (a scoring batch is unlabelled by definition); `pair_id`, `dataset` and `split` are kept as
passthrough columns so the scored output can be joined back to gold labels by anyone who wants to.
"""

from __future__ import annotations

from pathlib import Path

from simpair.atomic import atomic_path
from simpair.catalog import Catalog

SAMPLE_COLUMNS = ["pair_id", "text_a", "text_b", "dataset", "split"]


class NoTestSplit(LookupError):
    """Nothing to sample: no ingested dataset has a test split (a fresh home, or a dataset without one)."""


def make_sample_inbox(
    home: Path, inbox: Path, datasets: list[str] | None = None, limit: int | None = None
) -> list[Path]:
    """Write `<inbox>/<dataset>-<split>.parquet` for every test split of the ingested datasets.

    Raises NoTestSplit when there is none, before the inbox is created: an empty inbox that scores
    nothing would look like a success.
    """
    catalog = Catalog(home)
    tests = [
        (dataset, split)
        for dataset in datasets or catalog.datasets()
        for split, role in sorted(catalog.splits(dataset).items())
        if role == "test"
    ]
    if not tests:
        raise NoTestSplit(f"no ingested test split: run simpair ingest first (home {home})")
    inbox.mkdir(parents=True, exist_ok=True)
    written = []
    for dataset, split in tests:
        frame = catalog.read_split(dataset, split).select(SAMPLE_COLUMNS)
        if limit:
            frame = frame.head(limit)
        path = inbox / f"{dataset}-{split}.parquet"
        with atomic_path(path) as tmp:  # dot-prefixed: the inbox lister ignores it
            frame.write_parquet(tmp, compression="zstd", row_group_size=1024)
        written.append(path)
    return written
