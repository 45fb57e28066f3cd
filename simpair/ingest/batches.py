"""Candidate rows of one file collected in batches, checked, and spilled to Parquet parts.

Rows that pass the contract's row checks go to candidate parts. The checks are one polars select
(`checks`), so rows that pass cost no Python. Candidate parts are what dedupe and the final write
read back; every rejected record goes to a quarantine part with its raw text and the keys that
restore today's order of the quarantine file (see `QUARANTINE_ORDER`). Nothing grows with the
file but counters.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from simpair.contracts import Contract
from simpair.ingest import checks
from simpair.ingest.background import BackgroundWrites
from simpair.ingest.rows import Candidates, Rejected

BATCH_ROWS = 250_000
CANDIDATE_SCHEMA = {
    "line": pl.Int64,
    "raw": pl.Utf8,
    "split": pl.Utf8,
    "pair_id": pl.Utf8,
    "text_a": pl.Utf8,
    "text_b": pl.Utf8,
    "label": pl.Int8,
    "score": pl.Float64,
    "score_raw": pl.Float64,
}
# Quarantine rows carry their place: records rejected while parsing (phase 0, file order), then the
# row checks and duplicates of each split in contract order (phase 1), then bad extra values (phase 2,
# extra column by extra column). Sorting on these keys gives the order rows were always written in.
QUARANTINE_ORDER = ["_phase", "_extra", "_split", "file_index", "source_line"]
QUARANTINE_PART_SCHEMA = {
    "source_file": pl.Utf8,
    "source_line": pl.Int64,
    "raw_line": pl.Utf8,
    "reason": pl.Utf8,
    "detail": pl.Utf8,
    "split": pl.Utf8,
    "_phase": pl.Int8,
    "_extra": pl.Int32,
    "_split": pl.Int32,
    "file_index": pl.Int32,
}


def candidate_schema(contract: Contract) -> dict[str, pl.DataType]:
    return {**CANDIDATE_SCHEMA, **{e.name: pl.Utf8() for e in contract.columns.extra}}


def candidates_frame(cand: Candidates, contract: Contract) -> pl.DataFrame:
    columns = {name: getattr(cand, name) for name in CANDIDATE_SCHEMA}
    return pl.DataFrame({**columns, **cand.extra}, schema=candidate_schema(contract))


def split_index(contract: Contract) -> dict[str, int]:
    return {spec.split: i for i, spec in enumerate(contract.files)}


@dataclass
class PartSink:
    """Collects one file's candidate rows and rejects; `flush` checks a batch and writes its parts."""

    contract: Contract
    folder: Path  # this file's own folder of parts under the work folder
    file_index: int
    source_file: str
    batch_rows: int = BATCH_ROWS
    stem: str = ""  # prefix of this sink's part names (the chunk number when chunks are parsed apart)
    writes: BackgroundWrites | None = None  # writes parts on a second thread (else here, at once)
    parts: list[Path] = field(default_factory=list)
    quarantine_parts: list[Path] = field(default_factory=list)
    records_by_split: Counter[str] = field(default_factory=Counter)
    _frames: list[pl.DataFrame] = field(default_factory=list)
    _rejects: list[Rejected] = field(default_factory=list)
    _rows: int = 0

    def add(self, rows: pl.DataFrame, rejects: list[Rejected]) -> None:
        if rows.height:
            self._frames.append(rows)
            self._rows += rows.height
        self._rejects += rejects
        if self._rows + len(self._rejects) >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        """Check the collected rows and write them as one part (rows in line order) plus rejects."""
        self.folder.mkdir(parents=True, exist_ok=True)
        schema = candidate_schema(self.contract)
        frame = pl.concat(self._frames) if self._frames else pl.DataFrame(schema=schema)
        if len(self._frames) > 1:
            frame = frame.sort("line")
        rejects, self._frames, self._rejects, self._rows = self._rejects, [], [], 0
        self.records_by_split.update(dict(frame["split"].value_counts().iter_rows()))
        self.records_by_split.update(r.split or "" for r in rejects)
        failing = _failing(frame, self.contract)
        quarantine = [self._parse_reject(r) for r in rejects]
        if failing:
            bad = sorted(failing)
            failed = frame[bad].select("line", "raw", "split", "label", "score_raw")
            for i, row in zip(bad, failed.iter_rows(named=True), strict=True):
                problems = failing[i]
                reason = min((p.split(":")[0] for p in problems), key=_reason_rank)
                detail = checks.describe(problems, row, self.contract)
                quarantine.append(self._row(row["line"], row["raw"], reason, detail, row["split"], phase=1))
            keep = np.ones(frame.height, dtype=bool)
            keep[bad] = False
            frame = frame.filter(pl.Series(keep))
        number = f"{self.stem}{len(self.parts) + len(self.quarantine_parts):06d}"
        if frame.height:
            path = self.folder / f"part-{number}.parquet"
            # source_file and source_sha256 are the file's: added back when the part is read (`finish`)
            part = frame.with_columns(pl.lit(self.file_index, dtype=pl.Int32).alias("file_index"))
            self._write(part, path, compression="uncompressed", statistics=False)  # scratch: fast beats small
            self.parts.append(path)
        if quarantine:
            path = self.folder / f"quarantine-{number}.parquet"
            self._write(pl.DataFrame(quarantine, schema=QUARANTINE_PART_SCHEMA, orient="row"), path)
            self.quarantine_parts.append(path)

    def _write(self, frame: pl.DataFrame, path: Path, **options: object) -> None:
        if self.writes is None:
            frame.write_parquet(path, **options)  # type: ignore[arg-type]
        else:
            self.writes.submit(frame.write_parquet, path, **options)

    def _parse_reject(self, r: Rejected) -> tuple[object, ...]:
        return self._row(r.line, r.raw, r.reason, r.detail, r.split, phase=0)

    def _row(self, line: int, raw: str, reason: str, detail: str, split: str | None, phase: int) -> tuple:
        order = split_index(self.contract).get(split or "", -1) if phase else 0
        where = f"{self.source_file}:{line}: {detail}"
        return (self.source_file, line, raw, reason, where, split, phase, 0, order, self.file_index)


def _failing(frame: pl.DataFrame, contract: Contract) -> dict[int, list[str]]:
    """`checks.failing_rows` of the frame (one polars select: no per-row Python for rows that pass)."""
    return checks.failing_rows(frame, contract) if frame.height else {}


def _reason_rank(reason: str) -> int:
    order = checks.REASON_ORDER
    return order.index(reason) if reason in order else len(order)
