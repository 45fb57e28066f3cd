"""PNG plots for evaluation reports (matplotlib's Agg canvas: no display needed on workers).

A plot's cost must not grow with the split: the scatter draws a seeded sample of at most
`SCATTER_POINTS` pairs (the title says so), and histograms are drawn from counts per bin
(`numpy.histogram`), never from the points. Figures are built as `matplotlib.figure.Figure` without
pyplot, so no figure registry is kept and nothing needs closing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

SCATTER_POINTS = 20_000
DPI = 110


def sample_indices(n: int, limit: int = SCATTER_POINTS, seed: int = 0) -> np.ndarray:
    """All of 0..n-1 when n <= limit, else `limit` of them drawn without replacement (seeded, sorted)."""
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def confusion_matrix_png(tn: int, fp: int, fn: int, tp: int, path: Path, title: str) -> Path:
    """2x2 confusion matrix with counts in the cells (rows: gold, columns: predicted)."""
    matrix = np.array([[tn, fp], [fn, tp]])
    fig = Figure(figsize=(4, 3.6))
    ax = fig.subplots()
    ax.imshow(matrix, cmap="Blues")
    for (i, j), value in np.ndenumerate(matrix):
        colour = "white" if value > matrix.max() / 2 else "black"
        ax.text(j, i, str(value), ha="center", va="center", color=colour, fontsize=12)
    ax.set_xticks([0, 1], ["not paraphrase", "paraphrase"])
    ax.set_yticks([0, 1], ["not paraphrase", "paraphrase"])
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def scatter_png(predicted: np.ndarray, gold: np.ndarray, path: Path, title: str) -> Path:
    """Predicted vs gold 0-1 score, with the y = x line a perfect model would sit on."""
    return _save(scatter_figure(predicted, gold, title), path)


def scatter_figure(predicted: np.ndarray, gold: np.ndarray, title: str) -> Figure:
    """The scatter of `scatter_png`: at most `SCATTER_POINTS` pairs, a seeded sample of larger splits."""
    shown = sample_indices(len(gold))
    if len(shown) < len(gold):
        title = f"{title} ({len(shown):,} of {len(gold):,} pairs)"
    fig = Figure(figsize=(4.2, 4))
    ax = fig.subplots()
    ax.scatter(np.asarray(gold)[shown], np.asarray(predicted)[shown], s=6, alpha=0.35)
    ax.plot([0, 1], [0, 1], color="red", linewidth=1, label="y = x")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("gold score (0-1)")
    ax.set_ylabel("predicted score")
    ax.legend(loc="upper left")
    ax.set_title(title, fontsize=9)
    return fig


def histogram_png(
    scores: np.ndarray,
    classes: np.ndarray,
    names: dict[int, str],
    path: Path,
    title: str,
    threshold: float | None = None,
) -> Path:
    """Histogram of predicted scores, one colour per gold class (and the decision threshold)."""
    fig = Figure(figsize=(5, 3.4))
    ax = fig.subplots()
    bins = np.linspace(0, 1, 41)
    scores, classes = np.asarray(scores), np.asarray(classes)
    for value, name in names.items():
        mask = classes == value
        counts, _ = np.histogram(scores[mask], bins=bins)
        ax.stairs(counts, bins, fill=True, alpha=0.55, label=f"{name} (n={mask.sum()})")
    if threshold is not None:
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:.3f}")
    ax.set_xlabel("predicted score")
    ax.set_ylabel("pairs")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)
