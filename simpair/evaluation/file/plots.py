"""The PNGs of `evaluate --file`: the plots a split evaluation draws, for the model and the baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simpair.evaluation.plots import confusion_matrix_png, histogram_png, scatter_png


def draw_plots(
    kind: str,
    out: Path,
    name: str,
    score: np.ndarray,
    gold: np.ndarray,
    threshold: float | None,
    metrics: dict[str, Any],
    zs_score: np.ndarray | None,
    zs: dict[str, Any] | None,
) -> list[Path]:
    """The plots `evaluate_model` draws for a split, for the model and again for the baseline."""
    plots: list[Path] = []
    runs: list[tuple[str, str, np.ndarray, float | None, dict[str, Any]]] = [
        ("model", name, score, threshold, metrics)
    ]
    if zs is not None and zs_score is not None:
        runs.append(("zero-shot", "zero-shot backbone", zs_score, zs["threshold"], zs["metrics"]))
    for slug, title, values, cut, m in runs:
        if kind == "binary":
            if cut is not None:
                plots.append(
                    confusion_matrix_png(
                        m["tn"],
                        m["fp"],
                        m["fn"],
                        m["tp"],
                        out / f"{slug}-confusion.png",
                        f"{title} (threshold {cut:.3f})",
                    )
                )
            plots.append(
                histogram_png(
                    values,
                    gold,
                    {0: "not paraphrase", 1: "paraphrase"},
                    out / f"{slug}-histogram.png",
                    f"{title}: score per class",
                    cut,
                )
            )
        else:
            plots.append(
                scatter_png(values, gold, out / f"{slug}-scatter.png", f"{title}: predicted vs gold")
            )
            buckets = np.minimum((gold * 5).round().astype(np.int64), 5)
            names = {b: f"gold ~{b}/5" for b in sorted(set(buckets.tolist()))}
            plots.append(
                histogram_png(
                    values, buckets, names, out / f"{slug}-histogram.png", f"{title}: score per gold grade"
                )
            )
    return plots
