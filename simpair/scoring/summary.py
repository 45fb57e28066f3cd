"""The run summary: counts, pairs/s, pinned model and precision, as data and as markdown.

Printed as a table by the CLI, published as the Prefect artifact `nightly-score-summary`, and stored
in the ledger's `runs` table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from simpair.runtime.embedding_store import store_line
from simpair.runtime.model_ref import ModelRef
from simpair.scoring.chunk import ChunkResult
from simpair.scoring.commit import FileResult
from simpair.scoring.plan import FilePlan


@dataclass
class ScoreSummary:
    """What a run did, printed by the CLI and published as a Prefect artifact."""

    run_id: str
    model_name: str
    model_version: str
    precision: str = "fp32"  # what every chunk of the run was scored in (never auto: resolved)
    precision_requested: str = "fp32"  # auto, or differs when bf16 fell back to fp32 (no native bf16)
    precision_why: str | None = None  # with auto: the rung chosen and its dev figures, or why fp32
    files_seen: int = 0
    files_scored: int = 0
    files_rescored: int = 0  # of files_scored: batches another model version had scored before
    files_skipped: int = 0
    files_quarantined: int = 0
    rows_scored: int = 0
    rows_rejected: int = 0
    rows_truncated: int = 0
    rows_scored_this_run: int = 0
    scoring_seconds: float = 0.0
    pairs_per_s: float = 0.0
    files: list[dict] = field(default_factory=list)
    embedding_store: str | None = None  # the bi-encoder store's folder; None when not used
    embedding_store_kept: bool = False  # kept across runs (`embedding_cache`), else removed at the end
    sentences_encoded: int = 0  # distinct sentences the encoder ran on (store misses)
    embedding_memory_hits: int = 0  # distinct sentences per chunk found in the store's memory
    embedding_disk_hits: int = 0  # ... or on its disk
    rescore: str | None = None  # the run's re-scoring window and why; None when it scored new batches only
    # a paraphrase model with no chosen threshold (imported without a dev file): why `label` is empty
    threshold_note: str | None = None
    monitor: str | None = None  # the run's drift report (monitor.json); None when not monitored
    monitor_alarms: int = 0  # drift and health alarms it raised
    monitor_note: str | None = None  # its verdict in one line, or why drift was not checked

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(
    run_id: str,
    model: ModelRef,
    plans: list[FilePlan],
    results: list[FileResult],
    chunk_results: list[ChunkResult],
    scoring_seconds: float,
    precision: str = "fp32",
    precision_requested: str | None = None,
    embedding_store: str | None = None,
    embedding_store_kept: bool = False,
    rescore: str | None = None,
    precision_why: str | None = None,
) -> ScoreSummary:
    """Roll plans and results up into the run summary (one line per inbox file)."""
    by_sha = {r.sha256: r for r in results}
    summary = ScoreSummary(
        run_id,
        model.name,
        model.version,
        precision=precision,
        precision_requested=precision_requested or precision,
        files_seen=len(plans),
        precision_why=precision_why,
    )
    for plan in plans:
        result = by_sha.get(plan.sha256 or "") if plan.action == "score" else None
        if result is not None:
            status, detail = result.status, result.output_path or result.reason
        else:
            status, detail = plan.action, plan.reason
        if status in ("scored", "rescored"):
            summary.files_scored += 1
            if status == "rescored":
                summary.files_rescored += 1
            summary.rows_scored += result.rows_scored
            summary.rows_rejected += result.rows_rejected
            summary.rows_truncated += result.rows_truncated
        elif status == "quarantined":
            summary.files_quarantined += 1
        else:
            summary.files_skipped += 1
        summary.files.append({"file": plan.name, "status": status, "detail": detail})
    summary.rows_scored_this_run = sum(c.rows_scored for c in chunk_results)
    summary.embedding_store, summary.embedding_store_kept = embedding_store, embedding_store_kept
    summary.rescore = rescore
    summary.threshold_note = threshold_note(model)
    summary.sentences_encoded = sum(c.sentences_encoded for c in chunk_results)
    summary.embedding_memory_hits = sum(c.memory_hits for c in chunk_results)
    summary.embedding_disk_hits = sum(c.disk_hits for c in chunk_results)
    summary.scoring_seconds = round(scoring_seconds, 3)
    if scoring_seconds > 0:
        summary.pairs_per_s = round(summary.rows_scored_this_run / scoring_seconds, 1)
    return summary


def threshold_note(model: ModelRef) -> str | None:
    """Why a paraphrase model's rows carry no label: its threshold was never chosen (imported with no
    dev file), so scoring writes the probability only and leaves `label` null. None otherwise."""
    from simpair.models.metadata import ModelMetadata

    try:
        meta = ModelMetadata.read(Path(model.local_dir))
    except (OSError, ValueError):
        return None
    if meta.task != "paraphrase" or meta.threshold_chosen:
        return None
    return "no threshold (no dev file): probability only, label left empty"


def precision_note(summary: ScoreSummary) -> str:
    """One phrase saying what the run's precision means for its scores (console and artifact), and,
    for a model with no threshold, that its rows carry a probability and no label."""
    note = _precision_note(summary)
    return f"{note}; {summary.threshold_note}" if summary.threshold_note else note


def _precision_note(summary: ScoreSummary) -> str:
    if summary.precision_why:  # auto: "auto: int8 (0.2% flips, metric -0.001, 2.9x fp32)"
        return summary.precision_why
    if summary.precision_requested != summary.precision:
        return f"{summary.precision_requested} asked, no native {summary.precision_requested} here: fell back"
    if summary.precision == "bf16":
        return "opt-in bf16 autocast: scores differ from fp32, see docs/scoring.md"
    if summary.precision == "int8":
        return "opt-in int8 (ONNX Runtime), passed the parity guard on dev: scores differ from fp32"
    return "scores equal to fp32 reference"


def store_note(summary: ScoreSummary) -> str | None:
    """One line on the bi-encoder embedding store (console and artifact); None when it was not used."""
    return store_line(summary)


def monitor_line(summary: ScoreSummary) -> str:
    """The monitor's verdict and where its report is (console and artifact)."""
    where = f"; report {summary.monitor}" if summary.monitor else ""
    return f"{summary.monitor_note}{where}"


def summary_markdown(summary: ScoreSummary) -> str:
    """The run summary as a markdown report (Prefect artifact, docs)."""
    lines = [
        f"# Nightly scoring run `{summary.run_id}`",
        "",
        f"Model: **{summary.model_name}** version **{summary.model_version}** (pinned for the whole run)",
        "",
        f"Precision: **{summary.precision}** ({precision_note(summary)})",
        "",
        "| files scored | skipped | quarantined | rows scored | rejected | truncated | pairs/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {summary.files_scored} | {summary.files_skipped} | {summary.files_quarantined} | "
        f"{summary.rows_scored} | {summary.rows_rejected} | {summary.rows_truncated} | "
        f"{summary.pairs_per_s} |",
        "",
        *([f"Embedding store: {store_note(summary)}", ""] if store_note(summary) else []),
        *([f"Re-score: {summary.rescore}; {summary.files_rescored} file(s)", ""] if summary.rescore else []),
        *([f"Monitor: {monitor_line(summary)}", ""] if summary.monitor_note else []),
        "| file | status | detail |",
        "|---|---|---|",
    ]
    for item in summary.files:
        detail = str(item["detail"] or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{item['file']}` | {item['status']} | {detail} |")
    return "\n".join(lines) + "\n"
