"""PNG plots for evaluation reports (matplotlib, Agg backend: no display needed on workers)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def confusion_matrix_png(tn: int, fp: int, fn: int, tp: int, path: Path, title: str) -> Path:
    """2x2 confusion matrix with counts in the cells (rows: gold, columns: predicted)."""
    matrix = np.array([[tn, fp], [fn, tp]])
    fig, ax = plt.subplots(figsize=(4, 3.6))
    ax.imshow(matrix, cmap="Blues")
    for (i, j), value in np.ndenumerate(matrix):
        colour = "white" if value > matrix.max() / 2 else "black"
        ax.text(j, i, str(value), ha="center", va="center", color=colour, fontsize=12)
    ax.set_xticks([0, 1], ["not paraphrase", "paraphrase"])
    ax.set_yticks([0, 1], ["not paraphrase", "paraphrase"])
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def scatter_png(predicted: np.ndarray, gold: np.ndarray, path: Path, title: str) -> Path:
    """Predicted vs gold 0-1 score, with the y = x line a perfect model would sit on."""
    fig, ax = plt.subplots(figsize=(4.2, 4))
    ax.scatter(gold, predicted, s=6, alpha=0.35)
    ax.plot([0, 1], [0, 1], color="red", linewidth=1, label="y = x")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("gold score (0-1)")
    ax.set_ylabel("predicted score")
    ax.legend(loc="upper left")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def histogram_png(
    scores: np.ndarray,
    classes: np.ndarray,
    names: dict[int, str],
    path: Path,
    title: str,
    threshold: float | None = None,
) -> Path:
    """Histogram of predicted scores, one colour per gold class (and the decision threshold)."""
    fig, ax = plt.subplots(figsize=(5, 3.4))
    bins = np.linspace(0, 1, 41)
    for value, name in names.items():
        ax.hist(
            scores[classes == value], bins=bins, alpha=0.55, label=f"{name} (n={(classes == value).sum()})"
        )
    if threshold is not None:
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:.3f}")
    ax.set_xlabel("predicted score")
    ax.set_ylabel("pairs")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
