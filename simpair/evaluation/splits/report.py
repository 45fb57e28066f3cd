"""`report.md` of a split evaluation: one table row per split, per-group tables when asked, the plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def render_report(summary: dict[str, Any], plots: list[Path], out: Path) -> str:
    """Markdown: one table row per split, then the plots."""
    if summary["task"] == "paraphrase":
        threshold = f"threshold {summary['threshold']:.4f} (chosen on dev at training time)"
    else:  # a graded model's threshold is the untuned default: say so rather than imply it was chosen
        threshold = (
            f"no tuned threshold (graded model): binary splits are cut at the fixed "
            f"{summary['threshold']:.4f}, so read their ROC-AUC, not accuracy or F1"
        )
    lines = [
        f"# Evaluation of `{Path(summary['model_dir']).name}`",
        "",
        f"{summary['kind']}-encoder, task {summary['task']}, objective {summary['objective']}, {threshold}.",
        "",
        "| split | evaluated | leaked excluded | accuracy | F1 | precision | recall | ROC-AUC "
        "| Spearman | Pearson | MSE | MAE |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def fmt(m: dict[str, Any], *keys: str) -> str:
        for key in keys:
            if key in m:
                return f"{m[key]:.4f}"
        return ""

    for label, m in summary["splits"].items():
        lines.append(
            f"| {label} | {m['evaluated']} | {m['excluded_leaked']} | {fmt(m, 'accuracy')} | {fmt(m, 'f1')} "
            f"| {fmt(m, 'precision')} | {fmt(m, 'recall')} | {fmt(m, 'roc_auc')} "
            f"| {fmt(m, 'spearman', 'graded_spearman')} | {fmt(m, 'pearson', 'graded_pearson')} "
            f"| {fmt(m, 'mse', 'graded_mse')} | {fmt(m, 'mae', 'graded_mae')} |"
        )
    lines.append("")
    for label, m in summary["splits"].items():
        if "by_group" not in m:
            continue
        lines += [
            f"### {label} by group (pair ids matched by `{summary['group_pattern']}`)",
            "",
            "| group | evaluated | accuracy | F1 | ROC-AUC | Spearman | Pearson | MAE |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for group, g in m["by_group"].items():
            lines.append(
                f"| {group} | {g['evaluated']} | {fmt(g, 'accuracy')} | {fmt(g, 'f1')} | {fmt(g, 'roc_auc')} "
                f"| {fmt(g, 'spearman', 'graded_spearman')} | {fmt(g, 'pearson', 'graded_pearson')} "
                f"| {fmt(g, 'mae', 'graded_mae')} |"
            )
        lines.append("")
    for plot in plots:
        lines += [f"![{plot.stem}]({plot.relative_to(out)})", ""]
    return "\n".join(lines)
