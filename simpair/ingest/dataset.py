"""Ingest one source (one contract): resolve files, version, parse, check, guard, write, switch CURRENT.

One function per source so the Prefect flow can run sources as separate tasks and a broken source
fails alone while the others go on. Inside a source the work streams: files are parsed one file at a
time into Parquet parts in a work folder (`parse.py`), hashed in blocks by that same read (up front
only where a stored version may already hold them), then deduplicated, typed and written as row groups
(`finish.py`); memory stays flat whatever the size of the files.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import polars as pl
from filelock import FileLock

from simpair.catalog import datasets_root
from simpair.contracts import Contract, SplitFiles
from simpair.ingest.finish import Outputs, write_outputs
from simpair.ingest.parse import FileJob, FileResult, parse_file
from simpair.ingest.reader import SourceFileError
from simpair.ingest.report import STAT_KEYS, DatasetReport, SplitReport
from simpair.ingest.sources import SourceRoot, compression_of, plain_stem
from simpair.ingest.versioning import INGEST_CODE_VERSION, code_fingerprint, dataset_version
from simpair.ingest.writer import TMP_PREFIX, remove_leftovers, set_current, write_version
from simpair.stages import step

log = logging.getLogger(__name__)
# A new version that fails a split guard is written here for inspection, never made current.
REJECTED = "rejected"
# Files hashed at once: two cores, or a few object-store reads in flight.
_HASH_THREADS = 4


@dataclass
class SourceFile:
    split: SplitFiles | None  # None: split_column assigns each row its split
    relative: str
    sha256: str  # empty until the parse has hashed it (see `resolve_files`)
    tag: str  # names the file in default pair ids
    size: int | None = None  # stored bytes (None: the store did not say)


def resolve_files(
    contract: Contract, root: SourceRoot, stored: Callable[[dict[str, int | None]], bool] = lambda _: True
) -> list[SourceFile]:
    """Every file of every split; a pattern that matches nothing fails the source.

    A file is hashed up front only where a stored version may hold these very files (`stored`, asked
    with every file's size): that is what an unchanged re-run needs to know before it parses anything.
    Otherwise the version is new whatever the hashes, so each file is hashed while it is parsed and read
    once, not twice (`sha256` stays empty until then). Parquet files are always hashed up front, since
    their reads seek. The files are hashed on a few threads at once (reads and sha256 release the GIL);
    errors come in the order a one-by-one pass would meet them.
    """
    groups: list[tuple[SplitFiles | None, str, str]] = []
    if contract.split_column is not None:
        groups.append((None, contract.split_column.pattern, "split_column"))
    else:
        groups += [(spec, contract.split_pattern(spec), f"split {spec.split!r}") for spec in contract.files]
    found: list[tuple[SplitFiles | None, str, str]] = []
    sizes: dict[str, int | None] = {}
    for spec, pattern, what in groups:
        listed = root.listing(pattern)
        if not listed:
            for _, name, _ in found:  # a file before it that cannot be read fails first
                root.sha256(name)
            raise SourceFileError(
                f"{root.display(pattern)}: no file matches the pattern of {what} "
                f"(contract {contract.source_path})"
            )
        names = list(listed)
        found += [(spec, name, tag) for name, tag in zip(names, file_tags(names), strict=True)]
        sizes |= listed
    if contract.format.kind != "parquet" and not stored(sizes):
        return [SourceFile(spec, name, "", tag, sizes[name]) for spec, name, tag in found]
    with ThreadPoolExecutor(max_workers=_HASH_THREADS, thread_name_prefix="simpair-hash") as pool:
        digests = [pool.submit(root.sha256, name) for _, name, _ in found]
        try:
            return [
                SourceFile(spec, name, digest.result(), tag, sizes[name])
                for (spec, name, tag), digest in zip(found, digests, strict=True)
            ]
        finally:
            for digest in digests:
                digest.cancel()


def may_be_stored(dataset_dir: Path, contract: Contract, sizes: dict[str, int | None]) -> bool:
    """Whether a stored version of this dataset may hold exactly these files (same paths and sizes).

    A version is named by the hashes of its files, its contract and the code, so a version made with
    another contract, other code, other paths or files of other sizes cannot be tonight's. A file of
    unknown size may be anything. The current version's manifest is read first (the usual re-run); a
    manifest that predates recorded sizes is trusted only for the current version, so old versions do
    not force a second read of every new file (a source changed back to one of them is still found
    after the parse, see `_reuse`).
    """
    if None in sizes.values():
        return True
    current_file = dataset_dir / "CURRENT"
    current = current_file.read_text().strip() if current_file.is_file() else None
    manifests = sorted(dataset_dir.glob("*/manifest.json"), key=lambda p: p.parent.name != current)
    for path in manifests:
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            return True  # unreadable: assume it may match, and hash
        recorded = manifest.get("source_sizes", sizes if path.parent.name == current else None)
        if (
            manifest.get("contract_sha256") == contract.content_sha256
            and manifest.get("code_version") == code_fingerprint()
            and set(manifest.get("sources", {})) == set(sizes)
            and recorded == sizes
        ):
            return True
    return False


def file_tags(names: list[str]) -> list[str]:
    """The name of each file of one split in its default pair ids, unique within the split.

    The stem alone names a file unless two files of the split share it (a/x.tsv, b/x.tsv: their
    paths without suffixes). Files that still collide differ only by their suffixes: a/x.tsv and
    a/x.tsv.gz keep the compression suffix (a/x, a/x.gz), and any others their whole name. Tags that
    were unique before stay as they were, so existing pair ids do not move.
    """
    stems = [plain_stem(n) for n in names]
    tags = [
        s if stems.count(s) == 1 else str(PurePosixPath(n).with_name(s))
        for n, s in zip(names, stems, strict=True)
    ]
    if len(set(tags)) == len(tags):
        return tags
    clashing = {t for t in tags if tags.count(t) > 1}
    suffixed = [
        t + (PurePosixPath(n).suffix.lower() if compression_of(n) else "") if t in clashing else t
        for n, t in zip(names, tags, strict=True)
    ]
    return [n if suffixed.count(t) > 1 else t for n, t in zip(names, suffixed, strict=True)]


def file_jobs(
    contract: Contract, root: SourceRoot, files: list[SourceFile], work: Path, **sizes: int
) -> list[FileJob]:
    """One parse job per file, in the order the files were resolved (which orders rows and duplicates)."""
    group_sizes = Counter(f.split.split if f.split else None for f in files)
    return [
        FileJob(
            contract=contract,
            sources=root.url,
            relative=f.relative,
            sha256=f.sha256,
            tag=f.tag,
            split=f.split.split if f.split else None,
            file_index=i,
            work=work,
            only_file=group_sizes[f.split.split if f.split else None] == 1,
            **sizes,
        )
        for i, f in enumerate(files)
    ]


def _build_version(
    contract: Contract, files: list[SourceFile], results: list[FileResult], version: str, work: Path
) -> tuple[Outputs, list[SplitReport], dict[str, object]]:
    """The new version's files (under `work`), split reports and source-level facts."""
    outputs = write_outputs(contract, results, version, work, _metadata(contract, version, files))
    records = sum(r.records for r in results)
    quarantine = outputs.quarantine
    total_clean = sum(outputs.clean.values())
    if total_clean + quarantine.height != records:  # the lossless promise, checked on every run
        raise AssertionError(
            f"{contract.dataset}: {total_clean} clean + {quarantine.height} quarantined "
            f"!= {records} data records"
        )
    empty = [r.relative for r in results if r.empty]
    by_split: Counter[str] = Counter()
    fixes: Counter[str] = Counter()
    stats: dict[str, Counter[str]] = {spec.split: Counter() for spec in contract.files}
    for f, r in zip(files, sorted(results, key=lambda r: r.file_index), strict=True):
        by_split.update(r.records_by_split)
        fixes.update(r.stats)
        if f.split is not None:  # per-split fixes are only known when a whole file is one split
            stats[f.split.split].update(r.stats)
    reports = []
    for spec in contract.files:
        mine = quarantine.filter(pl.col("split") == spec.split)
        split_files = [f for f in files if f.split is None or f.split.split == spec.split]
        reports.append(
            SplitReport(
                split=spec.split,
                role=str(spec.role),
                files=[f.relative for f in split_files],
                sha256=[f.sha256 for f in split_files],
                empty_files=[f.relative for f in split_files if f.relative in empty],
                data_records=by_split[spec.split],
                clean=outputs.clean[spec.split],
                quarantined=mine.height,
                reasons=_reason_counts(mine),
                examples=_examples(mine),
                label_conflicts=outputs.conflicts.get(spec.split, 0),
                stats={k: int(stats[spec.split].get(k, 0)) for k in (*STAT_KEYS, "undecodable_lines")},
            )
        )
    unassigned = quarantine.filter(pl.col("split").is_null())
    warnings = _warnings(contract, outputs)
    facts: dict[str, object] = {
        "records": records,
        "empty_files": empty,
        "unassigned": unassigned.height,
        "unassigned_reasons": _reason_counts(unassigned),
        "unassigned_examples": _examples(unassigned),
        "extra_columns": outputs.extra_types,
        "fixes": {k: int(fixes[k]) for k in (*STAT_KEYS, "undecodable_lines") if fixes.get(k)},
        "warnings": warnings,
    }
    for warning in warnings:
        log.warning("%s: %s", contract.dataset, warning)
    return outputs, reports, facts


# Above this share of clean texts wrapped in quotes, the source's quoting is suspect. Texts that are
# quotations (MSRP: 1.4% of its texts start and end with '"') stay below it; a CSV-quoted file read
# with `quoting: none` keeps the quotes on nearly every text.
QUOTED_TEXT_SHARE = 0.05


def _warnings(contract: Contract, outputs: Outputs) -> list[str]:
    """One line per thing in the clean rows that looks wrong without failing any check."""
    quoted = sum(n for n, _ in outputs.quoted.values())
    texts = sum(checked for _, checked in outputs.quoted.values())
    if not texts or quoted <= QUOTED_TEXT_SHARE * texts:
        return []
    fmt = contract.format
    where = ", ".join(f"{n} in {split}" for split, (n, _) in outputs.quoted.items() if n)
    if fmt.kind == "delimited" and fmt.quoting == "none":
        fix = f"the file looks CSV-quoted: set format.quoting: csv in {contract.source_path}"
    else:
        fix = "check how the source quotes its fields"
    first = "" if texts == 2 * sum(outputs.clean.values()) else "the first "
    return [
        f"{quoted} of {first}{texts} clean texts ({quoted / texts:.0%}; {where}) start and end with "
        f"{fmt.quotechar!r}, the quotes kept as text; {fix}"
    ]


def _reason_counts(quarantine: pl.DataFrame) -> dict[str, int]:
    return dict(Counter(quarantine["reason"].to_list()))  # first-seen order, as the quarantine is sorted


def _examples(quarantine: pl.DataFrame) -> list[str]:
    """The first quarantined record of each reason, by file and line, as "reason: detail"."""
    first = quarantine.sort("source_file", "source_line").group_by("reason", maintain_order=True).first()
    said = {
        r: f"{r}: {d}"[:300]
        for r, d in zip(first["reason"].to_list(), first["detail"].to_list(), strict=True)
    }
    return [said[k] for k in sorted(said)]


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


@step("ingest-source", run_name="ingest-{contract.dataset}")
def ingest_dataset(
    contract: Contract,
    sources: str | Path,
    home: Path,
    parse_files: Callable[[list[FileJob]], list[FileResult]] | None = None,
    **sizes: int,
) -> DatasetReport:
    """Ingest one source; a bad file fails this source only (status "failed", error names the file).

    `parse_files` runs the per-file parse jobs (default: one after another; the flow passes a runner
    that parses them as parallel tasks). `sizes` (chunk_bytes, batch_rows) only matter to tests.
    """
    dataset_dir = datasets_root(home) / contract.dataset
    dataset_dir.mkdir(parents=True, exist_ok=True)
    root = SourceRoot.of(sources)
    base = DatasetReport(
        dataset=contract.dataset,
        contract=contract.source_path,
        status="failed",
        conflicting_labels=contract.duplicates.conflicting_labels,
    )
    with FileLock(str(dataset_dir / ".lock")):
        base.leftovers_removed = remove_leftovers(dataset_dir) + remove_leftovers(dataset_dir / REJECTED)
        current_file = dataset_dir / "CURRENT"
        previous = current_file.read_text().strip() if current_file.is_file() else None
        base.previous_version = previous
        try:
            files = resolve_files(contract, root, lambda sizes: may_be_stored(dataset_dir, contract, sizes))
            hashed = all(f.sha256 for f in files)
            if hashed and (reused := _reuse(contract, files, dataset_dir, base)):
                return reused
            work = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}work-", dir=dataset_dir))
            try:
                jobs = file_jobs(contract, root, files, work, **sizes)
                results = (parse_files or _parse_in_order)(jobs)
                files = _as_read(files, results)
                if not hashed and (reused := _reuse(contract, files, dataset_dir, base)):
                    return reused  # a stored version is never written twice
                assert base.version is not None
                outputs, reports, facts = _build_version(contract, files, results, base.version, work)
                return _commit(
                    contract, root, files, base.version, outputs, reports, facts, dataset_dir, base
                )
            finally:
                shutil.rmtree(work, ignore_errors=True)
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


def _reuse(
    contract: Contract, files: list[SourceFile], dataset_dir: Path, base: DatasetReport
) -> DatasetReport | None:
    """Name the version of these files; if it is stored, make it current and report it (else None)."""
    version = dataset_version(contract, {f.relative: f.sha256 for f in files})
    base.version = version
    existing = dataset_dir / version / "manifest.json"
    if not existing.is_file():
        return None
    manifest = json.loads(existing.read_text())
    if base.previous_version != version:  # e.g. a source was changed back: the old version becomes current
        set_current(dataset_dir, version)
    base.status = "unchanged" if base.previous_version == version else "ingested"
    base.splits = [SplitReport(**s["report"]) for s in manifest["splits"]]
    _set_facts(base, manifest.get("source", {}))
    return base


def _as_read(files: list[SourceFile], results: list[FileResult]) -> list[SourceFile]:
    """The files with the hash and size their parse read, so the manifest's sizes are those of the
    hashed bytes (a text file's parse reads it whole; a Parquet file keeps its up-front hash)."""
    read = {r.relative: r for r in results}
    out = []
    for f in files:
        result = read[f.relative]
        sha256 = f.sha256 or result.sha256
        if not sha256:
            raise AssertionError(f"{f.relative}: parsed without being hashed")
        out.append(replace(f, sha256=sha256, size=f.size if result.size is None else result.size))
    return out


def _parse_in_order(jobs: list[FileJob]) -> list[FileResult]:
    return [parse_file(job) for job in jobs]


def _commit(
    contract: Contract,
    root: SourceRoot,
    files: list[SourceFile],
    version: str,
    outputs: Outputs,
    reports: list[SplitReport],
    facts: dict[str, object],
    dataset_dir: Path,
    base: DatasetReport,
) -> DatasetReport:
    """Guard the new version, then move its files into place and switch CURRENT (or keep it aside)."""
    previous = base.previous_version
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
        "source_sizes": {f.relative: f.size for f in files if f.size is not None},
        "pair_id": _pair_id_rule(contract),
        "source": facts,
        "splits": [{"split": r.split, "role": r.role, "report": r.model_dump()} for r in reports],
    }
    base.splits = reports
    _set_facts(base, facts)
    problems = _guard_failures(reports, contract, _previous_clean(dataset_dir, previous))
    if problems:
        kept = write_version(
            dataset_dir / REJECTED, version, outputs.files, {**manifest, "rejected": problems}
        )
        current = f"CURRENT stays at {previous}" if previous else "No version is current yet"
        base.status = "failed"
        base.error = (
            f"{contract.source_path}: new version {version} rejected: " + "; ".join(problems)
            + f". {current}; the rejected version and its quarantine are in {kept}"
        )  # fmt: skip
        log.error("source %s failed: %s", contract.dataset, base.error)
        return base
    write_version(dataset_dir, version, outputs.files, manifest)
    set_current(dataset_dir, version)
    base.status = "ingested"
    log.info("ingested %s version %s", contract.dataset, version)
    return base


def _pair_id_rule(contract: Contract) -> str:
    columns = contract.columns.pair_id_columns()
    if not columns:
        return "<split>-<file stem>-<source line> (default)"
    return f"columns {columns} joined by {contract.columns.pair_id_separator!r}"


# Source-level facts kept in the manifest (`source`) and shown on the report.
_FACT_FIELDS = ("empty_files", "unassigned", "unassigned_reasons", "extra_columns", "fixes", "warnings")


def _set_facts(report: DatasetReport, facts: dict[str, object]) -> None:
    for name in _FACT_FIELDS:
        if name in facts:
            setattr(report, name, facts[name])
