"""What an ingest run did, as data (for code and Prefect) and as tables (for people).

The same report object is printed by the CLI with rich and published by the flow as a Prefect
markdown artifact, so the terminal and the UI can never disagree.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from rich.console import Group
from rich.table import Table
from rich.text import Text

STAT_KEYS = (
    "bom",
    "crlf_lines",
    "control_chars_removed",
    "mojibake_fixes",
    "whitespace_fixes",
    "nfc_changes",
)


class SplitReport(BaseModel):
    split: str
    role: str
    files: list[str]
    sha256: list[str]
    empty_files: list[str] = Field(default_factory=list)  # files with no data record (multi-file splits)
    data_records: int
    clean: int
    quarantined: int
    reasons: dict[str, int] = Field(default_factory=dict)
    stats: dict[str, int] = Field(default_factory=dict)
    # first quarantined record of each reason, "file:line: detail", so a reader sees what went wrong
    examples: list[str] = Field(default_factory=list)
    # pairs (exact or swapped copies) whose copies carry different labels; duplicates.conflicting_labels
    # says what was done with them
    label_conflicts: int = 0


class DatasetReport(BaseModel):
    dataset: str
    contract: str
    status: Literal["ingested", "unchanged", "failed"]
    version: str | None = None
    previous_version: str | None = None
    error: str | None = None
    leftovers_removed: int = 0
    splits: list[SplitReport] = Field(default_factory=list)
    empty_files: list[str] = Field(default_factory=list)
    # records whose split is unknown (split_column value unmapped or unreadable), quarantined with a reason
    unassigned: int = 0
    unassigned_reasons: dict[str, int] = Field(default_factory=dict)
    extra_columns: dict[str, str] = Field(default_factory=dict)  # kept column -> type
    fixes: dict[str, int] = Field(default_factory=dict)  # cleaning counts of the whole source
    conflicting_labels: str = "quarantine"  # the contract's rule for copies whose labels differ
    # what looks wrong in the clean rows though no check failed (texts still in quotes), a line each
    warnings: list[str] = Field(default_factory=list)


class LeakageCount(BaseModel):
    dataset: str
    split: str
    train_dataset: str
    train_split: str
    pairs: int


class LeakageReport(BaseModel):
    status: Literal["computed", "unchanged", "failed"]
    path: str
    inputs: dict[str, str] = Field(default_factory=dict)
    rows: int = 0
    counts: list[LeakageCount] = Field(default_factory=list)
    error: str | None = None


class IngestReport(BaseModel):
    datasets: list[DatasetReport]
    leakage: LeakageReport | None = None

    @property
    def failed(self) -> list[DatasetReport]:
        return [d for d in self.datasets if d.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed and (self.leakage is None or self.leakage.status != "failed")

    @property
    def changed(self) -> bool:
        return any(d.status == "ingested" for d in self.datasets)

    def failure_lines(self) -> list[str]:
        """One line per failure (a source, a contract file, the leakage report), each naming its file.

        The table wraps long errors over several lines; these are what a terminal or a log shows.
        """
        lines = [f"{d.dataset}: {d.error or 'failed'}" for d in self.failed]
        if self.leakage is not None and self.leakage.status == "failed":
            lines.append(f"leakage report: {self.leakage.error or self.leakage.path}")
        return [" ".join(line.split()) for line in lines]

    def headline(self) -> str:
        leakage = ""
        if self.leakage is not None and self.leakage.status == "failed":
            leakage = "; the leakage report failed"
        if self.failed:
            names = ", ".join(d.dataset for d in self.failed)
            return f"ingest finished with {len(self.failed)} failed source(s): {names}{leakage}"
        if not self.changed:
            done = "no work done" if not leakage else "no source changed"
            return f"nothing changed: every source matches its current version; {done}{leakage}"
        return "ingest finished: " + ", ".join(f"{d.dataset} {d.status}" for d in self.datasets) + leakage


class IngestFailedError(RuntimeError):
    """A run in which a source or the leakage report failed (the flow ends Failed); carries the report."""

    def __init__(self, report: IngestReport) -> None:
        super().__init__(report.headline() + ": " + "; ".join(d.error or "" for d in report.failed))
        self.report = report

    def __reduce__(self) -> tuple[type, tuple[IngestReport]]:
        # picklable for Prefect result persistence (the default reduce would pass the message as report)
        return (IngestFailedError, (self.report,))


def _reasons(reasons: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def _stats(stats: dict[str, int]) -> str:
    return ", ".join(f"{k} {stats[k]}" for k in STAT_KEYS if stats.get(k)) or "-"


def _split_rows(report: IngestReport) -> list[list[str]]:
    rows = []
    for d in report.datasets:
        if d.status == "failed":
            rows.append([d.dataset, "-", "-", "FAILED", "-", "-", "-", d.error or "", "-"])
            continue
        for s in d.splits:
            rows.append(
                [
                    d.dataset,
                    f"{s.split} ({s.role})",
                    d.version or "-",
                    d.status,
                    str(s.data_records),
                    str(s.clean),
                    str(s.quarantined),
                    _reasons(s.reasons),
                    _stats(s.stats),
                ]
            )
    return rows


_SPLIT_HEADERS = [
    "dataset",
    "split",
    "version",
    "status",
    "rows in",
    "clean",
    "quarantined",
    "reasons",
    "fixes",
]
_LEAK_HEADERS = ["eval dataset", "eval split", "train dataset", "train split", "shared pairs"]


def _leak_rows(report: IngestReport) -> list[list[str]]:
    if report.leakage is None:
        return []
    return [[c.dataset, c.split, c.train_dataset, c.train_split, str(c.pairs)] for c in report.leakage.counts]


def _source_notes(report: IngestReport) -> list[str]:
    """Facts about a source that belong to no single split: unassigned records, empty files, extras."""
    notes = []
    for d in report.datasets:
        if d.unassigned:
            reasons = _reasons(d.unassigned_reasons)
            notes.append(f"{d.dataset}: {d.unassigned} records in no split, quarantined ({reasons})")
        if d.empty_files:
            notes.append(f"{d.dataset}: empty files recorded, no rows: {', '.join(d.empty_files)}")
        per_split = any(v for s in d.splits for v in s.stats.values())
        if d.fixes and not per_split:  # split_column sources: fixes are known per file, not per split
            notes.append(f"{d.dataset}: fixes across all splits: {_stats(d.fixes)}")
        conflicts = {s.split: s.label_conflicts for s in d.splits if s.label_conflicts}
        if conflicts:
            listed = ", ".join(f"{n} in {split}" for split, n in conflicts.items())
            notes.append(
                f"{d.dataset}: pairs whose copies carry different labels: {listed} "
                f"(duplicates.conflicting_labels: {d.conflicting_labels})"
            )
        if d.extra_columns:
            kept = ", ".join(f"{k} ({v})" for k, v in d.extra_columns.items())
            notes.append(f"{d.dataset}: extra columns kept: {kept}")
        notes.extend(f"{d.dataset}: warning: {w}" for w in d.warnings)
    return notes


def summary_renderable(report: IngestReport) -> Group:
    """Rich tables: one row per split, then leakage counts."""
    splits = Table(title="simpair ingest", show_lines=False)
    for h in _SPLIT_HEADERS:
        splits.add_column(h, overflow="fold")
    for row in _split_rows(report):
        splits.add_row(*(Text(c) for c in row), style="red" if row[3] == "FAILED" else None)
    parts: list[object] = [splits]
    if report.leakage is not None:
        leak = Table(title=f"leakage ({report.leakage.status}, {report.leakage.rows} rows)")
        for h in _LEAK_HEADERS:
            leak.add_column(h)
        for row in _leak_rows(report):
            leak.add_row(*(Text(c) for c in row))
        parts.append(leak)
        if report.leakage.error:
            parts.append(Text(f"leakage failed: {report.leakage.error}", style="red"))
    notes = _source_notes(report)
    if notes:
        parts.append(Text("\n".join(notes)))
    examples = [
        f"  {d.dataset}/{s.split}: {e}" for d in report.datasets for s in d.splits for e in s.examples
    ]
    if examples:
        # Text, not a str: raw file content must never be read as rich markup ("[b]" in a sentence)
        parts.append(Text("quarantine examples (first of each reason):\n" + "\n".join(examples)))
    parts.append(Text(report.headline()))
    return Group(*parts)


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def cell(value: str) -> str:
        return value.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_markdown(report: IngestReport) -> str:
    """The same summary as markdown, for the Prefect artifact."""
    parts = [
        "# simpair ingest",
        "",
        f"**{report.headline()}**",
        "",
        _md_table(_SPLIT_HEADERS, _split_rows(report)),
    ]
    if report.leakage is not None:
        parts += [
            "",
            f"## Leakage ({report.leakage.status}, {report.leakage.rows} rows, `{report.leakage.path}`)",
            "",
            _md_table(_LEAK_HEADERS, _leak_rows(report)),
        ]
    notes = _source_notes(report)
    if notes:
        parts += ["", *(f"- {note}" for note in notes)]
    examples = [(d.dataset, s.split, e) for d in report.datasets for s in d.splits for e in s.examples]
    if examples:
        parts += ["", "## Quarantine examples (first of each reason)", ""]
        parts += [f"- {dataset}/{split}: `{text}`" for dataset, split, text in examples]
    return "\n".join(parts) + "\n"
