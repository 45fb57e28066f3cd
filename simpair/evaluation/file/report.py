"""The markdown report of `evaluate --file` and its metrics.json form (JSON has no NaN)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simpair.evaluation.file.metrics import MODEL_KEYS
from simpair.evaluation.file.validate import describe_drops


def finite(value: Any) -> Any:
    """JSON has no NaN: an undefined metric (one class, constant scores) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.4f}"


def render_file_report(summary: dict[str, Any], plots: list[Path], out: Path) -> str:
    """Markdown: the verdict, what was read and dropped, model vs zero-shot per metric, the plots."""
    kind = summary["label_kind"]
    zs = summary["zero_shot"]
    scale = (
        f", rescaled from {summary['range'][0]:g}-{summary['range'][1]:g} to 0-1" if summary["range"] else ""
    )
    threshold = (
        f"the model's own threshold {summary['threshold']:.4f} "
        "(chosen on dev at training time, not on this file)"
        if summary["threshold"] is not None
        else "no threshold (threshold-free metrics only)"
    )
    lines = [
        f"# `{Path(summary['file']).name}` evaluated with `{summary['model']}`",
        "",
        f"**{summary['verdict']}**",
        "",
        f"- file: `{summary['file']}`, {kind} labels from column `{summary['label_column']}`{scale}",
        f"- rows read {summary['rows_read']}, evaluated {summary['evaluated']}, "
        f"dropped {sum(summary['dropped'].values())}"
        + (f" ({describe_drops(summary['dropped'])}; see dropped.parquet)" if summary["dropped"] else ""),
        f"- model: {summary['kind']}-encoder, task {summary['task']}, objective {summary['objective']}, "
        f"{threshold}; {summary['model_metrics'].get('truncated', 0)} pairs truncated",
    ]
    overlap = summary["training_overlap"]
    if overlap["found"]:
        fate = "excluded" if overlap["excluded"] else "kept (scores on them are not on unseen data)"
        lines.append(f"- {overlap['found']} pairs are in the model's training data: {fate}")
    if overlap["not_checked"]:
        lines.append(
            f"- not checked against training data: {', '.join(overlap['not_checked'])} "
            "(not ingested in this home)"
        )
    if zs is not None:
        zs_cut = (
            f"threshold {zs['threshold']:.4f} from {zs['threshold_source']}"
            if zs["threshold"] is not None
            else "no threshold (no ingested training data to pick one on; threshold-free metrics only)"
        )
        lines.append(f"- zero-shot: untrained `{zs['backbone']}` as a bi-encoder (cosine), {zs_cut}")
    if summary["bootstrap_interval"]:
        low, high = summary["bootstrap_interval"]
        lines.append(
            f"- {summary['headline']} difference, 95% paired bootstrap interval over the rows: "
            f"{low:+.4f} to {high:+.4f}"
        )
    lines += ["", "| metric | model | zero-shot | model - zero-shot |", "|---|---|---|---|"]
    for key in MODEL_KEYS[kind]:
        model_value = summary["model_metrics"].get(key)
        zs_value = zs["metrics"].get(key) if zs is not None else None
        delta = summary["deltas"].get(key)
        lines.append(f"| {key} | {_fmt(model_value)} | {_fmt(zs_value)} | {_signed(delta)} |")
    lines.append("")
    for plot in plots:
        lines += [f"![{plot.stem}]({plot.relative_to(out)})", ""]
    return "\n".join(lines)


def _signed(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return f"{value:+.4f}"
