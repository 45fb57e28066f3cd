"""Ingest one source (one contract): resolve files, version, parse, check, guard, write, switch CURRENT.

One function per source so the Prefect flow can run sources as separate tasks and a broken source
fails alone while the others go on.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import polars as pl
import pyarrow as pa
from filelock import FileLock

from simpair.catalog import datasets_root
from simpair.contracts import Contract, SplitFiles
from simpair.ingest import checks, extras
from simpair.ingest.reader import EmptySourceFileError, SourceFileError, read_source
from simpair.ingest.report import STAT_KEYS, DatasetReport, SplitReport
from simpair.ingest.rows import build_candidates, resolve_columns
from simpair.ingest.sources import SourceRoot, compression_of, decompress, plain_stem
from simpair.ingest.versioning import INGEST_CODE_VERSION, code_fingerprint, dataset_version
from simpair.ingest.writer import remove_leftovers, set_current, write_version
from simpair.schema import PAIR_SCHEMA, QUARANTINE_SCHEMA

log = logging.getLogger(__name__)
# A new version that fails a split guard is written here for inspection, never made current.
REJECTED = "rejected"


@dataclass
class SourceFile:
    split: SplitFiles | None  # None: split_column assigns each row its split
    relative: str
    sha256: str
    tag: str  # names the file in default pair ids
    data: bytes | None  # stored bytes, dropped once parsed


def resolve_files(contract: Contract, root: SourceRoot) -> list[SourceFile]:
    """Every file of every split, hashed; a pattern that matches nothing fails the source."""
    groups: list[tuple[SplitFiles | None, str, str]] = []
    if contract.split_column is not None:
        groups.append((None, contract.split_column.pattern, "split_column"))
    else:
        groups += [(spec, contract.split_pattern(spec), f"split {spec.split!r}") for spec in contract.files]
    out: list[SourceFile] = []
    for spec, pattern, what in groups:
        names = root.glob(pattern)
        if not names:
            raise SourceFileError(
                f"{root.display(pattern)}: no file matches the pattern of {what} "
                f"(contract {contract.source_path})"
            )
        stems = [plain_stem(n) for n in names]
        for name, stem in zip(names, stems, strict=True):
            # the stem alone names the file unless two files of the split share it (a/x.tsv, b/x.tsv)
            tag = stem if stems.count(stem) == 1 else str(PurePosixPath(name).with_name(stem))
            data = root.read_bytes(name)
            out.append(SourceFile(spec, name, hashlib.sha256(data).hexdigest(), tag, data))
    return out


@dataclass
class Parsed:
    """Every record of a source: candidate rows (all splits) and the records rejected before checks."""

    frame: pl.DataFrame
    quarantine: list[dict[str, object]]
    records: int
    records_by_split: Counter[str]
    empty_files: list[str]
    stats_by_split: dict[str, Counter[str]]
    fixes: Counter[str]


_CANDIDATE_SCHEMA = {
    "line": pl.Int64,
    "raw": pl.Utf8,
    "split": pl.Utf8,
    "pair_id": pl.Utf8,
    "text_a": pl.Utf8,
    "text_b": pl.Utf8,
    "label": pl.Int8,
    "score": pl.Float64,
    "score_raw": pl.Float64,
    "source_file": pl.Utf8,
    "source_sha256": pl.Utf8,
}


def _parse_files(contract: Contract, files: list[SourceFile], root: SourceRoot, version: str) -> Parsed:
    frames: list[pl.DataFrame] = []
    quarantine: list[dict[str, object]] = []
    by_split: Counter[str] = Counter()
    stats: dict[str, Counter[str]] = {spec.split: Counter() for spec in contract.files}
    empty: list[str] = []
    fixes: Counter[str] = Counter()  # the whole source's cleaning counts, whatever the split mode
    records = 0
    group_sizes = Counter(f.split.split if f.split else None for f in files)
    extra_schema = {e.name: pl.Utf8 for e in contract.columns.extra}
    for f in files:
        name = root.display(f.relative)
        assert f.data is not None
        data = decompress(f.data, compression_of(f.relative, contract.format.compression), name)
        f.data = None
        try:
            read = read_source(data, name, contract.format)
        except EmptySourceFileError:
            if group_sizes[f.split.split if f.split else None] == 1:
                raise  # a split's only file: nothing to ingest is an error, as it always was
            empty.append(f.relative)
            continue
        split = f.split.split if f.split else None
        records += read.stats["data_records"]
        positions = resolve_columns(contract, read.header, name)
        cand = build_candidates(read.records, contract, positions, split, f.tag)
        file_stats = Counter(
            {k: v for k, v in read.stats.items() if k not in ("physical_lines", "data_records")}
        )
        file_stats.update(cand.clean_stats.counts)
        fixes.update(file_stats)
        if split is not None:  # per-split fixes are only known when a whole file is one split
            stats[split].update(file_stats)
        by_split.update(cand.split)
        for r in cand.rejected:
            by_split[r.split or ""] += 1
            quarantine.append(_quarantine_row(contract, version, f.relative, r.line, r.raw, r.reason,
                                              f"{f.relative}:{r.line}: {r.detail}", r.split))  # fmt: skip
        columns = {
            "line": cand.line,
            "raw": cand.raw,
            "split": cand.split,
            "pair_id": cand.pair_id,
            "text_a": cand.text_a,
            "text_b": cand.text_b,
            "label": cand.label,
            "score": cand.score,
            "score_raw": cand.score_raw,
            "source_file": [f.relative] * len(cand.line),
            "source_sha256": [f.sha256] * len(cand.line),
            **cand.extra,
        }
        frames.append(pl.DataFrame(columns, schema={**_CANDIDATE_SCHEMA, **extra_schema}))
    frame = pl.concat(frames) if frames else pl.DataFrame(schema={**_CANDIDATE_SCHEMA, **extra_schema})
    return Parsed(frame, quarantine, records, by_split, empty, stats, fixes)


def _quarantine_row(
    contract: Contract, version: str, source_file: str, line: int, raw: str, reason: str, detail: str,
    split: str | None,
) -> dict[str, object]:  # fmt: skip
    return {
        "source_file": source_file,
        "source_line": line,
        "raw_line": raw,
        "reason": reason,
        "detail": detail,
        "split": split,
        "dataset": contract.dataset,
        "dataset_version": version,
    }


def _checked(
    contract: Contract, frame: pl.DataFrame, version: str
) -> tuple[pl.DataFrame, list[dict[str, object]]]:
    """One split's candidates after the contract's row checks and duplicate removal."""
    quarantine: list[dict[str, object]] = []
    failing = checks.failing_rows(frame, contract)
    dups = checks.duplicate_rows(frame, contract, skip=set(failing))
    rejects = [
        (i, min((p.split(":")[0] for p in problems), key=_reason_rank), "failed " + ", ".join(problems))
        for i, problems in failing.items()
    ] + [(i, reason, detail) for i, (reason, detail) in dups.items()]
    for i, reason, detail in sorted(rejects):
        row = frame.row(i, named=True)
        where = f"{row['source_file']}:{row['line']}"
        quarantine.append(_quarantine_row(contract, version, row["source_file"], row["line"], row["raw"],
                                          reason, f"{where}: {detail}", row["split"]))  # fmt: skip
    bad = [i for i, *_ in rejects]
    keep = frame.with_row_index("_i").filter(~pl.col("_i").is_in(bad)).drop("_i")
    return keep, quarantine


def _typed_extras(
    contract: Contract, frame: pl.DataFrame, version: str
) -> tuple[pl.DataFrame, list[dict[str, object]], dict[str, str]]:
    """Extra columns typed over every split at once; rows with a value of the wrong type are quarantined."""
    quarantine: list[dict[str, object]] = []
    types: dict[str, str] = {}
    bad: set[int] = set()
    typed_columns = []
    for spec in contract.columns.extra:
        typed, failed, kind = extras.type_extra(spec, frame[spec.name])
        types[spec.name] = kind
        typed_columns.append(typed)
        for i in failed:
            if i in bad:
                continue
            bad.add(i)
            row = frame.row(i, named=True)
            detail = f"{row['source_file']}:{row['line']}: {spec.name} {row[spec.name]!r} is not {kind}"
            quarantine.append(_quarantine_row(contract, version, row["source_file"], row["line"], row["raw"],
                                              "bad_extra", detail, row["split"]))  # fmt: skip
    if typed_columns:
        frame = frame.with_columns(typed_columns)
    keep = frame.with_row_index("_i").filter(~pl.col("_i").is_in(sorted(bad))).drop("_i")
    return keep, quarantine, types


def _clean_table(contract: Contract, frame: pl.DataFrame, version: str) -> pl.DataFrame:
    clean = frame.select(
        "pair_id",
        "text_a",
        "text_b",
        "label",
        pl.col("score").cast(pl.Float32),
        "score_raw",
        "split",
        pl.lit(contract.dataset).alias("dataset"),
        pl.lit(version).alias("dataset_version"),
        "source_file",
        "source_sha256",
        pl.col("line").alias("source_line"),
        *(e.name for e in contract.columns.extra),
    )
    if contract.label.kind == "graded":
        clean = clean.with_columns(pl.lit(None, dtype=pl.Int8).alias("label"))
    return clean


def _build_version(
    contract: Contract, files: list[SourceFile], root: SourceRoot, version: str
) -> tuple[dict[str, pl.DataFrame], list[dict[str, object]], list[SplitReport], dict[str, object]]:
    """Clean tables per split, quarantine rows, split reports and source-level facts of one new version."""
    parsed = _parse_files(contract, files, root, version)
    quarantine = list(parsed.quarantine)
    checked: list[pl.DataFrame] = []
    for spec in contract.files:
        kept, rejected = _checked(contract, parsed.frame.filter(pl.col("split") == spec.split), version)
        checked.append(kept)
        quarantine += rejected
    kept_all = pl.concat(checked)
    kept_all, rejected, extra_types = _typed_extras(contract, kept_all, version)
    quarantine += rejected
    clean_all = _clean_table(contract, kept_all, version)
    clean = {spec.split: clean_all.filter(pl.col("split") == spec.split) for spec in contract.files}
    total_clean = sum(t.height for t in clean.values())
    if total_clean + len(quarantine) != parsed.records:  # the lossless promise, checked on every run
        raise AssertionError(
            f"{contract.dataset}: {total_clean} clean + {len(quarantine)} quarantined "
            f"!= {parsed.records} data records"
        )
    reports = []
    for spec in contract.files:
        mine = [q for q in quarantine if q["split"] == spec.split]
        split_files = [f for f in files if f.split is None or f.split.split == spec.split]
        stats = parsed.stats_by_split[spec.split]
        reports.append(
            SplitReport(
                split=spec.split,
                role=str(spec.role),
                files=[f.relative for f in split_files],
                sha256=[f.sha256 for f in split_files],
                empty_files=[f.relative for f in split_files if f.relative in parsed.empty_files],
                data_records=parsed.records_by_split[spec.split],
                clean=clean[spec.split].height,
                quarantined=len(mine),
                reasons=dict(Counter(str(q["reason"]) for q in mine)),
                examples=_examples(mine),
                stats={k: int(stats.get(k, 0)) for k in (*STAT_KEYS, "undecodable_lines")},
            )
        )
    unassigned = [q for q in quarantine if q["split"] is None]
    facts: dict[str, object] = {
        "records": parsed.records,
        "empty_files": parsed.empty_files,
        "unassigned": len(unassigned),
        "unassigned_reasons": dict(Counter(str(q["reason"]) for q in unassigned)),
        "unassigned_examples": _examples(unassigned),
        "extra_columns": extra_types,
        "fixes": {k: int(parsed.fixes[k]) for k in (*STAT_KEYS, "undecodable_lines") if parsed.fixes.get(k)},
    }
    return clean, quarantine, reports, facts


def _examples(quarantine: list[dict[str, object]]) -> list[str]:
    first: dict[str, str] = {}
    for row in sorted(quarantine, key=lambda r: (str(r["source_file"]), int(str(r["source_line"])))):
        first.setdefault(str(row["reason"]), f"{row['reason']}: {row['detail']}"[:300])
    return [first[k] for k in sorted(first)]


def _reason_rank(reason: str) -> int:
    order = checks.REASON_ORDER
    return order.index(reason) if reason in order else len(order)


def _metadata(contract: Contract, version: str, files: list[SourceFile]) -> dict[str, str]:
    return {
        "simpair.dataset": contract.dataset,
        "simpair.dataset_version": version,
        "simpair.contract_version": contract.contract_version,
        "simpair.contract_sha256": contract.content_sha256,
        "simpair.code_version": code_fingerprint(),
        "simpair.source_sha256": json.dumps({f.relative: f.sha256 for f in files}, sort_keys=True),
    }


def _guard_failures(reports: list[SplitReport], contract: Contract, previous: dict[str, int]) -> list[str]:
    """Why this version must not become current: a split that came out empty or shrank sharply."""
    checks_ = contract.checks
    problems = []
    for r in reports:
        top = _reasons_text(r.reasons)
        if r.clean < checks_.min_clean_rows:
            problems.append(
                f"split {r.split!r} has {r.clean} clean rows of {r.data_records} read "
                f"(checks.min_clean_rows {checks_.min_clean_rows}; quarantined: {top})"
            )
        elif r.data_records and r.clean / r.data_records < checks_.min_clean_share:
            problems.append(
                f"split {r.split!r} keeps {r.clean} of {r.data_records} rows, under checks.min_clean_share "
                f"{checks_.min_clean_share} (quarantined: {top})"
            )
        elif previous.get(r.split) and r.clean < checks_.min_share_of_current * previous[r.split]:
            problems.append(
                f"split {r.split!r} has {r.clean} clean rows against {previous[r.split]} in the current "
                "version, "
                f"under checks.min_share_of_current {checks_.min_share_of_current} (quarantined: {top}); "
                "if the shrink is intended, lower that threshold in the contract"
            )
    return problems


def _reasons_text(reasons: dict[str, int], top: int = 3) -> str:
    ranked = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ", ".join(f"{k} {v}" for k, v in ranked) or "none"


def _previous_clean(dataset_dir: Path, previous: str | None) -> dict[str, int]:
    if previous is None or not (dataset_dir / previous / "manifest.json").is_file():
        return {}
    manifest = json.loads((dataset_dir / previous / "manifest.json").read_text())
    return {s["split"]: int(s["report"]["clean"]) for s in manifest["splits"]}


def ingest_dataset(contract: Contract, sources: str | Path, home: Path) -> DatasetReport:
    """Ingest one source; a bad file fails this source only (status "failed", error names the file)."""
    dataset_dir = datasets_root(home) / contract.dataset
    dataset_dir.mkdir(parents=True, exist_ok=True)
    root = SourceRoot.of(sources)
    base = DatasetReport(dataset=contract.dataset, contract=contract.source_path, status="failed")
    with FileLock(str(dataset_dir / ".lock")):
        base.leftovers_removed = remove_leftovers(dataset_dir) + remove_leftovers(dataset_dir / REJECTED)
        current_file = dataset_dir / "CURRENT"
        previous = current_file.read_text().strip() if current_file.is_file() else None
        base.previous_version = previous
        try:
            files = resolve_files(contract, root)
            version = dataset_version(contract, {f.relative: f.sha256 for f in files})
            base.version = version
            existing = dataset_dir / version / "manifest.json"
            if existing.is_file():
                manifest = json.loads(existing.read_text())
                if previous != version:  # e.g. a source was changed back: the old version becomes current
                    set_current(dataset_dir, version)
                base.status = "unchanged" if previous == version else "ingested"
                base.splits = [SplitReport(**s["report"]) for s in manifest["splits"]]
                _set_facts(base, manifest.get("source", {}))
                return base
            clean, quarantine, reports, facts = _build_version(contract, files, root, version)
            meta = _metadata(contract, version, files)
            tables = {f"{split}.parquet": _arrow(contract, table, meta) for split, table in clean.items()}
            qtable = pa.Table.from_pylist(quarantine, schema=QUARANTINE_SCHEMA).replace_schema_metadata(meta)
            tables["quarantine.parquet"] = qtable
            manifest = {
                "dataset": contract.dataset,
                "version": version,
                "contract_path": contract.source_path,
                "contract_version": contract.contract_version,
                "contract_sha256": contract.content_sha256,
                "code_version": code_fingerprint(),
                "ingest_code_version": INGEST_CODE_VERSION,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "sources_root": root.url,
                "sources": {f.relative: f.sha256 for f in files},
                "pair_id": _pair_id_rule(contract),
                "source": facts,
                "splits": [{"split": r.split, "role": r.role, "report": r.model_dump()} for r in reports],
            }
            base.splits = reports
            _set_facts(base, facts)
            problems = _guard_failures(reports, contract, _previous_clean(dataset_dir, previous))
            if problems:
                kept = write_version(
                    dataset_dir / REJECTED, version, tables, {**manifest, "rejected": problems}
                )
                current = f"CURRENT stays at {previous}" if previous else "No version is current yet"
                base.status = "failed"
                base.error = (
                    f"{contract.source_path}: new version {version} rejected: " + "; ".join(problems)
                    + f". {current}; the rejected version and its quarantine are in {kept}"
                )  # fmt: skip
                log.error("source %s failed: %s", contract.dataset, base.error)
                return base
            write_version(dataset_dir, version, tables, manifest)
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


def _arrow(contract: Contract, table: pl.DataFrame, meta: dict[str, str]) -> pa.Table:
    """The canonical schema, then the extra columns in contract order."""
    arrow = table.to_arrow()
    fields = list(PAIR_SCHEMA) + [arrow.schema.field(e.name) for e in contract.columns.extra]
    return arrow.cast(pa.schema(fields)).replace_schema_metadata(meta)


def _pair_id_rule(contract: Contract) -> str:
    columns = contract.columns.pair_id_columns()
    if not columns:
        return "<split>-<file stem>-<source line> (default)"
    return f"columns {columns} joined by {contract.columns.pair_id_separator!r}"


# Source-level facts kept in the manifest (`source`) and shown on the report.
_FACT_FIELDS = ("empty_files", "unassigned", "unassigned_reasons", "extra_columns", "fixes")


def _set_facts(report: DatasetReport, facts: dict[str, object]) -> None:
    for name in _FACT_FIELDS:
        if name in facts:
            setattr(report, name, facts[name])
