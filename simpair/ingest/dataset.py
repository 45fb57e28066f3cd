"""Ingest one source (one contract): resolve files, version, parse, check, write, switch CURRENT.

One function per source so the Prefect flow can run sources as separate tasks and a broken source
fails alone while the others go on.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
from filelock import FileLock

from simpair.catalog import datasets_root
from simpair.contracts import Contract, SplitFiles
from simpair.ingest import checks
from simpair.ingest.reader import SourceFileError, read_records
from simpair.ingest.report import STAT_KEYS, DatasetReport, SplitReport
from simpair.ingest.rows import build_candidates, resolve_columns
from simpair.ingest.versioning import INGEST_CODE_VERSION, code_fingerprint, dataset_version, file_sha256
from simpair.ingest.writer import remove_leftovers, set_current, write_version
from simpair.schema import PAIR_SCHEMA, QUARANTINE_SCHEMA

log = logging.getLogger(__name__)


@dataclass
class SourceFile:
    split: SplitFiles
    path: Path
    relative: str
    sha256: str


def resolve_files(contract: Contract, sources: Path) -> list[SourceFile]:
    """Every file of every split, hashed; a pattern that matches nothing fails the source."""
    out: list[SourceFile] = []
    for spec in contract.files:
        matches = sorted(p for p in sources.glob(spec.pattern) if p.is_file())
        if not matches:
            raise SourceFileError(
                f"{sources / spec.pattern}: no file matches the pattern of split {spec.split!r} "
                f"(contract {contract.source_path})"
            )
        for path in matches:
            out.append(SourceFile(spec, path, path.relative_to(sources).as_posix(), file_sha256(path)))
    return out


def _split_tables(
    contract: Contract, files: list[SourceFile], split: SplitFiles, version: str
) -> tuple[pl.DataFrame, list[dict[str, object]], SplitReport]:
    """Clean rows (polars, canonical columns) and quarantine rows of one split, with its counts."""
    frames: list[pl.DataFrame] = []
    quarantine: list[dict[str, object]] = []
    stats: Counter[str] = Counter()
    data_records = 0

    def reject(f: SourceFile, line: int, raw: str, reason: str, detail: str) -> None:
        quarantine.append(
            {
                "source_file": f.relative,
                "source_line": line,
                "raw_line": raw,
                "reason": reason,
                "detail": detail,
                "split": split.split,
                "dataset": contract.dataset,
                "dataset_version": version,
            }
        )

    for f in files:
        read = read_records(f.path, contract.format)
        stats.update({k: v for k, v in read.stats.items() if k not in ("physical_lines", "data_records")})
        data_records += read.stats["data_records"]
        positions = resolve_columns(contract, read.header, f.path)
        cand = build_candidates(read.records, contract, positions, split.split)
        stats.update(cand.clean_stats.counts)
        for r in cand.rejected:
            reject(f, r.line, r.raw, r.reason, f"{f.relative}:{r.line}: {r.detail}")
        frames.append(
            pl.DataFrame(
                {
                    "line": cand.line,
                    "raw": cand.raw,
                    "pair_id": cand.pair_id,
                    "text_a": cand.text_a,
                    "text_b": cand.text_b,
                    "label": cand.label,
                    "score": cand.score,
                    "score_raw": cand.score_raw,
                    "source_file": [f.relative] * len(cand.line),
                    "source_sha256": [f.sha256] * len(cand.line),
                },
                schema={
                    "line": pl.Int64,
                    "raw": pl.Utf8,
                    "pair_id": pl.Utf8,
                    "text_a": pl.Utf8,
                    "text_b": pl.Utf8,
                    "label": pl.Int8,
                    "score": pl.Float64,
                    "score_raw": pl.Float64,
                    "source_file": pl.Utf8,
                    "source_sha256": pl.Utf8,
                },
            )
        )
    frame = pl.concat(frames)
    failing = checks.failing_rows(frame, contract)
    dups = checks.duplicate_rows(frame, contract, skip=set(failing))
    for i, problems in sorted(failing.items()):
        reason = min((p.split(":")[0] for p in problems), key=_reason_rank)
        row = frame.row(i, named=True)
        detail = f"{row['source_file']}:{row['line']}: failed " + ", ".join(problems)
        reject(_by_name(files, row["source_file"]), row["line"], row["raw"], reason, detail)
    for i, (reason, detail) in sorted(dups.items()):
        row = frame.row(i, named=True)
        where = f"{row['source_file']}:{row['line']}"
        reject(_by_name(files, row["source_file"]), row["line"], row["raw"], reason, f"{where}: {detail}")
    bad = set(failing) | set(dups)
    keep = frame.with_row_index("_i").filter(~pl.col("_i").is_in(list(bad))).drop("_i")
    clean = keep.select(
        "pair_id",
        "text_a",
        "text_b",
        "label",
        pl.col("score").cast(pl.Float32),
        "score_raw",
        pl.lit(split.split).alias("split"),
        pl.lit(contract.dataset).alias("dataset"),
        pl.lit(version).alias("dataset_version"),
        "source_file",
        "source_sha256",
        pl.col("line").alias("source_line"),
    )
    if contract.label.kind == "graded":
        clean = clean.with_columns(pl.lit(None, dtype=pl.Int8).alias("label"))
    reasons = Counter(str(q["reason"]) for q in quarantine)
    if clean.height + len(quarantine) != data_records:  # the lossless promise, checked on every run
        raise AssertionError(
            f"{contract.dataset}/{split.split}: {clean.height} clean + {len(quarantine)} quarantined "
            f"!= {data_records} data records"
        )
    report = SplitReport(
        split=split.split,
        role=split.role,
        files=[f.relative for f in files],
        sha256=[f.sha256 for f in files],
        data_records=data_records,
        clean=clean.height,
        quarantined=len(quarantine),
        reasons=dict(reasons),
        examples=_examples(quarantine),
        stats={k: int(stats.get(k, 0)) for k in (*STAT_KEYS, "undecodable_lines")},
    )
    return clean, quarantine, report


def _examples(quarantine: list[dict[str, object]]) -> list[str]:
    first: dict[str, str] = {}
    for row in sorted(quarantine, key=lambda r: (str(r["source_file"]), int(str(r["source_line"])))):
        first.setdefault(str(row["reason"]), f"{row['reason']}: {row['detail']}"[:300])
    return [first[k] for k in sorted(first)]


def _reason_rank(reason: str) -> int:
    order = checks.REASON_ORDER
    return order.index(reason) if reason in order else len(order)


def _by_name(files: list[SourceFile], relative: str) -> SourceFile:
    return next(f for f in files if f.relative == relative)


def _metadata(contract: Contract, version: str, files: list[SourceFile]) -> dict[str, str]:
    import json

    return {
        "simpair.dataset": contract.dataset,
        "simpair.dataset_version": version,
        "simpair.contract_version": contract.contract_version,
        "simpair.contract_sha256": contract.content_sha256,
        "simpair.code_version": code_fingerprint(),
        "simpair.source_sha256": json.dumps({f.relative: f.sha256 for f in files}, sort_keys=True),
    }


def ingest_dataset(contract: Contract, sources: Path, home: Path) -> DatasetReport:
    """Ingest one source; a bad file fails this source only (status "failed", error names the file)."""
    dataset_dir = datasets_root(home) / contract.dataset
    dataset_dir.mkdir(parents=True, exist_ok=True)
    base = DatasetReport(dataset=contract.dataset, contract=contract.source_path, status="failed")
    with FileLock(str(dataset_dir / ".lock")):
        base.leftovers_removed = remove_leftovers(dataset_dir)
        current_file = dataset_dir / "CURRENT"
        previous = current_file.read_text().strip() if current_file.is_file() else None
        base.previous_version = previous
        try:
            files = resolve_files(contract, sources)
            version = dataset_version(contract, {f.relative: f.sha256 for f in files})
            base.version = version
            existing = dataset_dir / version / "manifest.json"
            if existing.is_file():
                import json

                manifest = json.loads(existing.read_text())
                if previous != version:  # e.g. a source was changed back: the old version becomes current
                    set_current(dataset_dir, version)
                base.status = "unchanged" if previous == version else "ingested"
                base.splits = [SplitReport(**s["report"]) for s in manifest["splits"]]
                return base
            clean_tables: dict[str, pa.Table] = {}
            quarantine: list[dict[str, object]] = []
            manifest_splits: list[dict[str, object]] = []
            meta = _metadata(contract, version, files)
            for spec in contract.files:
                split_files = [f for f in files if f.split.split == spec.split]
                clean, rejected, split_report = _split_tables(contract, split_files, spec, version)
                table = clean.to_arrow().cast(PAIR_SCHEMA).replace_schema_metadata(meta)
                clean_tables[f"{spec.split}.parquet"] = table
                quarantine += rejected
                base.splits.append(split_report)
                manifest_splits.append(
                    {"split": spec.split, "role": spec.role, "report": split_report.model_dump()}
                )
            qtable = pa.Table.from_pylist(quarantine, schema=QUARANTINE_SCHEMA).replace_schema_metadata(meta)
            clean_tables["quarantine.parquet"] = qtable
            manifest = {
                "dataset": contract.dataset,
                "version": version,
                "contract_path": contract.source_path,
                "contract_version": contract.contract_version,
                "contract_sha256": contract.content_sha256,
                "code_version": code_fingerprint(),
                "ingest_code_version": INGEST_CODE_VERSION,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "sources": {f.relative: f.sha256 for f in files},
                "splits": manifest_splits,
            }
            write_version(dataset_dir, version, clean_tables, manifest)
            set_current(dataset_dir, version)
            base.status = "ingested"
            log.info("ingested %s version %s", contract.dataset, version)
            return base
        except (SourceFileError, OSError) as exc:
            base.status = "failed"
            base.error = str(exc)
            base.splits = []
            log.error("source %s failed: %s", contract.dataset, exc)
            return base
        except Exception as exc:  # a bug must not stop the other sources of a nightly run; it is logged whole
            log.exception("source %s failed with an internal error", contract.dataset)
            base.status = "failed"
            base.error = f"internal error while ingesting {contract.source_path}: {type(exc).__name__}: {exc}"
            base.splits = []
            return base
