"""`simpair review import FILE`: reviewers' labels into the versioned `reviews` dataset, nothing lost.

An import reads one file of reviews:

- a Label Studio JSON export (`simpair.review.labelstudio.read_export`): one record per annotation
  (a task nobody annotated, or one a reviewer skipped, is one record too);
- a CSV or Parquet file with `pair_id` and `label` (and optionally `reviewer`) against an exported
  queue (`queue`: a scoring output, its `_review/` folder, one run's queue folder or `queue.parquet`):
  one record per row.

Each record then becomes a review or a rejected record with its reason, in two stages:

1. here, what only the review loop knows: `unknown_pair_id` (not in the given queue, or, without one,
   a Label Studio task whose `pair_id` is not its texts' review key), `not_reviewed`,
   `skipped_by_reviewer`, `no_answer`, `bad_label` (not yes/no, or not a number in 0-5),
   `conflicting_review` (reviewers of one pair disagree: every copy; for 0-5 ratings, more than 1 apart)
   and `duplicate_review` (a second reviewer agreeing with the first: the first is kept, with
   `reviewers` counting both; ratings averaged). These are written to
   `<home>/reviews/rejected/<file>.parquet` in the ingest quarantine's schema.
2. the accepted reviews are written as one Parquet source file under `<home>/reviews/sources/<task>/`
   and the dataset is ingested from all of them through its data contract (`data_contracts/reviews.yaml`
   for yes/no paraphrase labels, `reviews-sts.yaml` for 0-5 ratings) by ingest's own
   `ingest_dataset`: versioned, cleaned, checked, its quarantine beside it (a pair reviewed again in a
   later import, for one), and the leakage report recomputed over every dataset (`update_leakage`), so
   review pairs that sit in an evaluation split, or traffic pairs that sit in a training split, are
   reported, and evaluation leaves out the evaluation twin as it does for every leaked pair.

The queue a pair came from is kept (`queue` column) and decides its split: uncertain and disputed
pairs are the `train` split, random ones the `traffic` evaluation split. Every record is accounted
for: records = reviews kept from this file + rejected here + quarantined by ingest from this file
(`ReviewImport.balanced`, checked on every import).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, Field

from simpair import settings
from simpair.catalog import Catalog, CatalogError
from simpair.contracts import Contract, load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.leakage import LeakageInputError, update_leakage
from simpair.ingest.writer import atomic_write_parquet
from simpair.review.labelstudio import read_export
from simpair.review.queue import QUEUES, review_keys
from simpair.review.store import read_queues
from simpair.schema import QUARANTINE_SCHEMA

log = logging.getLogger(__name__)

ReviewTask = Literal["paraphrase", "sts"]
CONTRACTS: dict[str, str] = {"paraphrase": "reviews.yaml", "sts": "reviews-sts.yaml"}
SPLIT_OF_QUEUE = {"uncertain": "train", "disputed": "train", "random": "traffic"}
# 0-5 ratings of one pair further apart than this are a disagreement, not noise around one judgement
MAX_RATING_SPREAD = 1.0
_YES = {"yes", "y", "1", "1.0", "true", "paraphrase", "same"}
_NO = {"no", "n", "0", "0.0", "false", "not paraphrase", "not_paraphrase", "different"}
_RECORD_SCHEMA = {
    "line": pl.Int64,
    "raw": pl.Utf8,
    "pair_id": pl.Utf8,
    "text_a": pl.Utf8,
    "text_b": pl.Utf8,
    "queue": pl.Utf8,
    "model": pl.Utf8,
    "version": pl.Utf8,
    "run_id": pl.Utf8,
    "reviewer": pl.Utf8,
    "value": pl.Utf8,
    "problem": pl.Utf8,
    "detail": pl.Utf8,
}


class ReviewImportError(ValueError):
    """A review file that cannot be imported at all (unreadable, wrong columns, no queue to match)."""


class ReviewImport(BaseModel):
    """What one import did: every record of the file is a review or a rejected record with its reason."""

    file: str
    task: ReviewTask
    dataset: str
    status: Literal["ingested", "unchanged", "nothing_to_ingest"]
    version: str | None = None
    previous_version: str | None = None
    records: int
    reviews: int = 0  # this file's records kept as rows of the dataset
    reviews_by_queue: dict[str, int] = Field(default_factory=dict)
    rejected: dict[str, int] = Field(default_factory=dict)  # reason -> records rejected by this import
    quarantined: dict[str, int] = Field(
        default_factory=dict
    )  # reason -> quarantined by the contract's checks
    rejected_path: str | None = None
    leakage: dict[str, int] = Field(default_factory=dict)  # what of the dataset sits where it must not
    leakage_error: str | None = None
    dataset_rows: dict[str, int] = Field(default_factory=dict)  # split -> rows of the whole version

    @property
    def balanced(self) -> bool:
        return self.records == self.reviews + sum(self.rejected.values()) + sum(self.quarantined.values())

    def headline(self) -> str:
        lost = ", ".join(f"{n} {r}" for r, n in {**self.rejected, **self.quarantined}.items()) or "none"
        return (
            f"{self.file}: {self.records} records -> {self.reviews} reviews "
            f"({', '.join(f'{n} {q}' for q, n in self.reviews_by_queue.items()) or 'none'}), "
            f"rejected: {lost}; {self.dataset} version {self.version or '-'} ({self.status})"
        )


def _record(line: int, raw: str, **fields: Any) -> dict[str, Any]:
    return {**dict.fromkeys(_RECORD_SCHEMA), "line": line, "raw": raw, **fields}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_review_records(path: Path) -> pl.DataFrame:
    """One row per record of the file (`_RECORD_SCHEMA`), `problem` set where it gives no review."""
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix.lower() == ".gz" else path.suffix.lower()
    if suffix == ".json":
        rows = []
        for entry in read_export(path):
            data = entry.data
            rows.append(
                _record(
                    entry.task, entry.raw, pair_id=_text(data.get("pair_id")),
                    text_a=_text(data.get("text_a")), text_b=_text(data.get("text_b")),
                    queue=_text(data.get("queue")),
                    model=_text(data.get("model")), version=_text(data.get("version")),
                    run_id=_text(data.get("run_id")), reviewer=entry.reviewer, value=_text(entry.value),
                    problem=entry.problem,
                )
            )  # fmt: skip
        return (
            pl.DataFrame(rows, schema=_RECORD_SCHEMA, orient="row")
            if rows
            else pl.DataFrame(schema=_RECORD_SCHEMA)
        )
    if suffix in (".csv", ".tsv", ".parquet"):
        try:
            if suffix == ".parquet":
                table = pl.read_parquet(path)
                table = table.with_columns(pl.all().cast(pl.Utf8))
                first_line = 1
            else:
                table = pl.read_csv(path, separator="\t" if suffix == ".tsv" else ",", infer_schema=False)
                first_line = 2  # after the header
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise ReviewImportError(f"{path}: cannot read: {exc}") from exc
        missing = [c for c in ("pair_id", "label") if c not in table.columns]
        if missing:
            raise ReviewImportError(
                f"{path}: needs columns pair_id and label; missing {missing} (has {table.columns})"
            )
        raw = [json.dumps(r, ensure_ascii=False) for r in table.to_dicts()]
        reviewer = table["reviewer"] if "reviewer" in table.columns else pl.Series([None] * table.height)
        return (
            pl.DataFrame(
                {
                    "line": pl.int_range(first_line, first_line + table.height, eager=True),
                    "raw": raw,
                    "pair_id": table["pair_id"].str.strip_chars(),
                    "value": table["label"].str.strip_chars(),
                    "reviewer": reviewer.cast(pl.Utf8),
                }
            )
            .with_columns(
                pl.lit(None, pl.Utf8).alias(c)
                for c in _RECORD_SCHEMA
                if c not in ("line", "raw", "pair_id", "value", "reviewer")
            )
            .select(list(_RECORD_SCHEMA))
            .cast(_RECORD_SCHEMA)
        )  # type: ignore[arg-type]
    raise ReviewImportError(
        f"{path}: expected a Label Studio .json export, or a .csv, .tsv or .parquet of pair_id,label"
    )


def _match_queue(records: pl.DataFrame, queue_root: Path | None) -> pl.DataFrame:
    """Texts, queue and model of each record from the exported queue; unknown ids marked."""
    ok = pl.col("problem").is_null()
    if queue_root is not None:
        queued = read_queues(queue_root).select(
            "pair_id",
            *(pl.col(c).alias(f"q_{c}") for c in ("text_a", "text_b", "queue", "model", "version", "run_id")),
        )
        joined = records.join(queued, on="pair_id", how="left", maintain_order="left")
        known = pl.col("q_queue").is_not_null()
        joined = joined.with_columns(
            *(
                pl.coalesce(f"q_{c}", c).alias(c)
                for c in ("text_a", "text_b", "queue", "model", "version", "run_id")
            ),
            pl.when(ok & ~known).then(pl.lit("unknown_pair_id")).otherwise("problem").alias("problem"),
            pl.when(ok & ~known)
            .then(
                pl.format(
                    "pair_id {} is in no review queue under {}",
                    pl.col("pair_id").fill_null("(none)"),
                    pl.lit(str(queue_root)),
                )
            )
            .otherwise("detail")
            .alias("detail"),
        )
        return joined.select(list(_RECORD_SCHEMA))
    if records.filter(ok).height and records.filter(ok)["text_a"].is_null().all():
        raise ReviewImportError(
            "a file of pair_id,label needs --queue: the exported queue its pair ids come from"
        )
    filled = records.with_columns(pl.col("text_a").fill_null(""), pl.col("text_b").fill_null(""))
    keys = review_keys(filled["text_a"], filled["text_b"])
    matches = (keys == records["pair_id"]).fill_null(False) & records["queue"].is_in(list(QUEUES)).fill_null(
        False
    )
    bad = ok & ~pl.lit(matches)
    return records.with_columns(
        pl.when(bad).then(pl.lit("unknown_pair_id")).otherwise("problem").alias("problem"),
        pl.when(bad)
        .then(
            pl.lit(
                "pair_id and queue do not match the task's texts (give --queue to check against the queue)"
            )
        )
        .otherwise("detail")
        .alias("detail"),
    )


def _infer_task(values: list[str]) -> ReviewTask:
    """0-5 ratings when any answer is a number other than 0 or 1, else yes/no paraphrase labels."""
    for value in values:
        try:
            number = float(value)
        except ValueError:
            continue
        if number not in (0.0, 1.0):
            return "sts"
    return "paraphrase"


def _label(value: str | None, task: ReviewTask) -> float | None:
    if value is None:
        return None
    if task == "paraphrase":
        text = value.strip().lower()
        return 1.0 if text in _YES else 0.0 if text in _NO else None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if 0.0 <= number <= 5.0 else None


def _settle(records: pl.DataFrame, task: ReviewTask) -> pl.DataFrame:
    """Labels parsed; for each pair its first good record kept, the rest duplicates or all conflicting."""
    labels = pl.Series("lab", [_label(v, task) for v in records["value"].to_list()], dtype=pl.Float64)
    records = records.with_columns(labels).with_row_index("rec")
    allowed = "yes or no" if task == "paraphrase" else "a number from 0 to 5"
    records = records.with_columns(
        pl.when(pl.col("problem").is_null() & pl.col("lab").is_null())
        .then(pl.lit("bad_label"))
        .otherwise("problem")
        .alias("problem"),
        pl.when(pl.col("problem").is_null() & pl.col("lab").is_null())
        .then(pl.format("label {} is not {}", pl.col("value").fill_null("(none)"), pl.lit(allowed)))
        .otherwise("detail")
        .alias("detail"),
    )
    good = pl.col("problem").is_null()
    spread_limit = 0.0 if task == "paraphrase" else MAX_RATING_SPREAD
    stats = (
        records.filter(good)
        .group_by("pair_id")
        .agg(
            (pl.col("lab").max() - pl.col("lab").min()).alias("spread"),
            pl.col("lab").mean().alias("mean_lab"),
            pl.len().alias("reviewers"),
            pl.col("rec").min().alias("first_rec"),
            pl.col("reviewer").drop_nulls().unique(maintain_order=True).str.join(",").alias("reviewer_list"),
            pl.format("{} ({})", pl.col("value"), pl.col("reviewer").fill_null("?"))
            .str.join(", ")
            .alias("said"),
        )
    )
    records = records.join(stats, on="pair_id", how="left", maintain_order="left")
    conflicting = good & (pl.col("spread") > spread_limit)
    duplicate = good & ~conflicting & (pl.col("rec") != pl.col("first_rec"))
    first_line = records.select("rec", "line").rename({"rec": "first_rec", "line": "kept_line"})
    records = records.join(first_line, on="first_rec", how="left", maintain_order="left")
    return records.with_columns(
        pl.when(conflicting)
        .then(pl.lit("conflicting_review"))
        .when(duplicate)
        .then(pl.lit("duplicate_review"))
        .otherwise("problem")
        .alias("problem"),
        pl.when(conflicting)
        .then(pl.format("reviewers disagree on pair {}: {}", pl.col("pair_id"), pl.col("said")))
        .when(duplicate)
        .then(pl.format("agrees with the review at line {}, which is kept", pl.col("kept_line")))
        .otherwise("detail")
        .alias("detail"),
    )


def _staged(kept: pl.DataFrame, task: ReviewTask, source: Path) -> pl.DataFrame:
    label = pl.col("mean_lab").round(0).cast(pl.Int8) if task == "paraphrase" else pl.col("mean_lab")
    return kept.select(
        "pair_id", "text_a", "text_b", label.alias("label"), "queue",
        pl.col("reviewers").cast(pl.Int64), pl.col("reviewer_list").alias("reviewer"),
        "model", pl.col("version").alias("model_version"), pl.col("run_id").alias("scoring_run_id"),
        pl.lit(source.name).alias("imported_from"), pl.col("line").alias("import_line"),
    )  # fmt: skip


def _rejects(rejected: pl.DataFrame, source: Path, dataset: str, version: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source_file": [str(source)] * rejected.height,
            "source_line": rejected["line"],
            "raw_line": rejected["raw"].fill_null(""),
            "reason": rejected["problem"],
            "detail": rejected["detail"],
            "split": rejected["queue"].replace_strict(SPLIT_OF_QUEUE, default=None, return_dtype=pl.Utf8),
            "dataset": [dataset] * rejected.height,
            "dataset_version": [version] * rejected.height,
        }
    ).cast({f.name: pl.Int64 if f.name == "source_line" else pl.Utf8 for f in QUARANTINE_SCHEMA})


def review_contract(task: ReviewTask, contracts: Path | None = None) -> Contract:
    """The task's review contract from the contracts folder, else the one shipped with simpair."""
    name = CONTRACTS[task]
    folder = settings.contracts_dir(contracts)
    path = folder / name if (folder / name).is_file() else settings.shipped_path(f"data_contracts/{name}")
    return load_contract(path)


def reviews_root(home: Path) -> Path:
    return Path(home) / "reviews"


def import_reviews(
    path: str | Path,
    home: str | Path | None = None,
    queue: str | Path | None = None,
    task: ReviewTask | None = None,
    contracts: str | Path | None = None,
) -> ReviewImport:
    """Import one review file into the task's reviews dataset (see the module docstring).

    Raises `ReviewImportError` for a file that cannot be imported at all, and `RuntimeError` when the
    dataset's ingest fails (its message; the accepted reviews are then not kept, so a re-run after a
    fix imports them again).
    """
    source = Path(path).expanduser().resolve()
    home_dir = settings.home_dir(home)
    if not source.is_file():
        raise ReviewImportError(f"{source}: no such file")
    records = read_review_records(source)
    records = _match_queue(records, Path(queue).expanduser() if queue is not None else None)
    task = task or _infer_task(records.filter(pl.col("problem").is_null())["value"].drop_nulls().to_list())
    settled = _settle(records, task)
    contract = review_contract(task, Path(contracts) if contracts else None)
    kept = settled.filter(pl.col("problem").is_null())
    rejected = settled.filter(pl.col("problem").is_not_null())

    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    stem = f"{source.stem}-{digest}"
    root = reviews_root(home_dir)
    relative = f"{task}/{stem}.parquet"
    staged_path = root / "sources" / relative
    existed = staged_path.is_file()
    catalog = Catalog(home_dir)
    report = ReviewImport(
        file=str(source),
        task=task,
        dataset=contract.dataset,
        status="nothing_to_ingest",
        records=settled.height,
    )
    if kept.height:
        staged_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(_staged(kept, task, source).to_arrow(), staged_path)
    if staged_path.is_file() or any((root / "sources" / task).glob("*.parquet")):
        ingested = ingest_dataset(contract, sources=root / "sources", home=home_dir)
        if ingested.status == "failed":
            if not existed:
                staged_path.unlink(missing_ok=True)
            raise RuntimeError(ingested.error or f"ingest of {contract.dataset} failed")
        report.status = ingested.status
        report.version, report.previous_version = ingested.version, ingested.previous_version
    report.rejected = dict(Counter(rejected["problem"].to_list()))
    if rejected.height:
        rejected_path = root / "rejected" / f"{stem}.parquet"
        rejected_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(
            _rejects(rejected, source, contract.dataset, report.version or "").to_arrow(), rejected_path
        )
        report.rejected_path = str(rejected_path)
    if report.version is not None:
        _count_version(report, catalog, relative)
        _leakage(report, home_dir)
    if not report.balanced:  # the lossless promise, checked on every import
        raise ReviewImportError(
            f"{source}: {report.records} records != {report.reviews} reviews + {report.rejected} rejected "
            f"+ {report.quarantined} quarantined"
        )
    log.info(report.headline())
    return report


def _count_version(report: ReviewImport, catalog: Catalog, relative: str) -> None:
    """This file's reviews and quarantined rows in the new version, and the version's split sizes."""
    dataset, version = report.dataset, report.version
    by_queue: Counter[str] = Counter()
    for split in catalog.splits(dataset):
        rows = catalog.read_split(dataset, split, version)
        report.dataset_rows[split] = rows.height
        mine = rows.filter(pl.col("source_file") == relative)
        by_queue.update(mine["queue"].to_list())
    report.reviews = sum(by_queue.values())
    report.reviews_by_queue = {q: by_queue[q] for q in ("uncertain", "disputed", "random") if by_queue[q]}
    quarantine = catalog.quarantine(dataset, version).filter(pl.col("source_file") == relative)
    report.quarantined = dict(Counter(quarantine["reason"].to_list()))


def _leakage(report: ReviewImport, home: Path) -> None:
    """The leakage report over every current dataset, and what it says of the reviews."""
    try:
        update_leakage(home)
        leakage = Catalog(home).leakage()
    except (LeakageInputError, CatalogError, OSError) as exc:
        report.leakage_error = " ".join(str(exc).split())
        return
    name = report.dataset
    mine = leakage.filter(pl.col("train_dataset") == name)
    report.leakage = {
        # reviewed training pairs that are also evaluation pairs elsewhere (left out of those evaluations)
        "train_pairs_in_evaluation_splits": mine.filter(pl.col("dataset") != name)[
            "train_pair_id"
        ].n_unique(),
        # traffic pairs that some training split (another dataset's, or the reviews' own) also holds
        "traffic_pairs_in_training_splits": leakage.filter(pl.col("dataset") == name)["pair_id"].n_unique(),
    }
