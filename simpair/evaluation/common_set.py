"""The gate's common pair set: every model compared on the same pairs, at its own dev threshold.

Evaluation pairs that also occur in a train-role split (ingest's leakage report), or in a split the
challenger trained on, are excluded for every model compared, so challenger, champion and the zero-shot
backbone are scored on exactly the same pairs even when they were trained on different splits. Canary
splits (off-domain checks) also drop the canary pairs the challenger itself trained on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from simpair.catalog import Catalog
from simpair.models import ModelMetadata
from simpair.training.leaked_pairs import leaked_pair_ids, trained_pairs

# the binary figures a graded model reports: its 0.5 was never tuned, so only threshold-free ones
THRESHOLD_FREE_BINARY = ("roc_auc", "n", "evaluated")


@dataclass
class Evaluation:
    """Flat metrics (`<dataset>/<split>/<metric>`) of one model on the gate's common pair set."""

    metrics: dict[str, float]
    artifacts: list[Path] = field(default_factory=list)
    # per split label: the scored pairs (`pair_id`, `raw`, `score`, `probability`, gold), leaked pairs
    # excluded, so a figure with an interval (the gate's traffic check) can resample the same rows
    scored: dict[str, pl.DataFrame] = field(default_factory=dict)
    threshold: float = 0.5
    # an uncalibrated bi-encoder clips cosines at 0: its rank figures are read on `raw`
    clipped: bool = False


def gate_exclusions(
    home: Path, eval_sets: Sequence[tuple[str, str]], trained_splits: Sequence[str] = ()
) -> dict[str, set[str]]:
    """Evaluation pair ids that also occur in *any* train-role split (ingest's leakage report), or in
    one of `trained_splits` ("dataset/split", e.g. a dev split a refit model trained on).

    The gate excludes the union for every model it compares, so challenger, champion and zero-shot
    are scored on exactly the same pairs even when they were trained on different splits.
    """
    catalog = Catalog(home)
    leakage = catalog.leakage()
    train_role = {
        f"{d}/{s}" for d in catalog.datasets() for s, role in catalog.splits(d).items() if role == "train"
    }
    counted = train_role | set(trained_splits)
    return {
        f"{dataset}/{split}": leaked_pair_ids(leakage, dataset, split, train_splits=counted)
        for dataset, split in eval_sets
    }


def evaluate(
    model_dir: Path,
    home: Path,
    eval_sets: Sequence[tuple[str, str]],
    excluded: Mapping[str, set[str]],
    out_dir: Path,
) -> Evaluation:
    """Score every pair with `evaluate_model` (plots, report), then compute the gate's metrics on the
    common set: all pairs of each split minus `excluded`, at the model's own dev-chosen threshold."""
    from simpair.evaluation.splits import evaluate_model
    from simpair.metrics.binary_classification import binary_metrics
    from simpair.metrics.graded_similarity import graded_metrics

    result = evaluate_model(
        model_dir, home, datasets=[tuple(s) for s in eval_sets], exclude_leaked=False, out_dir=out_dir
    )
    meta = ModelMetadata.read(model_dir)
    threshold = float(meta.threshold)
    # An uncalibrated bi-encoder (the zero-shot backbone) scores clip(cosine, 0, 1): negative cosines
    # tie at 0. Rank figures (ROC-AUC, Spearman) are read on the raw cosine, whose order is the model's.
    clipped = meta.kind == "bi" and meta.calibration is None
    catalog = Catalog(home)
    metrics: dict[str, float] = {}
    scored: dict[str, pl.DataFrame] = {}
    for (dataset, split), pred_path in zip(eval_sets, result.predictions_paths, strict=True):
        label = f"{dataset}/{split}"
        gold = catalog.read_split(dataset, split).select(
            "pair_id", pl.col("label").alias("gold_label"), pl.col("score").alias("gold_score")
        )
        frame = pl.read_parquet(pred_path).join(gold, on="pair_id", how="inner")
        frame = frame.filter(~pl.col("pair_id").is_in(list(excluded.get(label, set()))))
        scored[label] = frame
        values: dict[str, float] = {"evaluated": float(frame.height)}
        raw = frame["raw"].to_numpy()
        if frame.height and frame["gold_label"].null_count() == 0:
            prob = frame["probability" if "probability" in frame.columns else "score"].to_numpy()
            binary = binary_metrics(prob, frame["gold_label"].to_numpy(), threshold)
            if meta.task != "paraphrase":  # a graded model's 0.5 was never tuned: threshold-free only
                binary = {k: v for k, v in binary.items() if k in THRESHOLD_FREE_BINARY}
            if clipped:
                binary["roc_auc"] = binary_metrics(raw, frame["gold_label"].to_numpy(), threshold)["roc_auc"]
            values.update(binary)
        elif frame.height and frame["gold_score"].null_count() == 0:
            graded = graded_metrics(frame["score"].to_numpy(), frame["gold_score"].to_numpy())
            if clipped:
                graded["spearman"] = graded_metrics(raw, frame["gold_score"].to_numpy())["spearman"]
            values.update(graded)
        metrics.update({f"{label}/{k}": float(v) for k, v in values.items()})
    artifacts = [result.report_path, *result.plot_paths]
    return Evaluation(
        metrics=metrics,
        artifacts=[Path(p) for p in artifacts if p],
        scored=scored,
        threshold=threshold,
        clipped=clipped,
    )


def canary_exclusions(
    home: Path, canary_sets: Sequence[tuple[str, str]], challenger_dir: Path
) -> dict[str, set[str]]:
    """The gate's exclusion union on each canary split, plus the canary pairs the challenger trained on.

    A canary is a split the challenger should not have seen; where it did see some of its pairs (a
    canary drawn from a split it refit on), those pairs would measure memory, not transfer.
    """
    meta = ModelMetadata.read(challenger_dir)
    excluded = gate_exclusions(home, canary_sets, meta.train_datasets)
    exact, splits = trained_pairs(challenger_dir, meta)
    catalog = Catalog(home)
    for dataset, split in canary_sets:
        label = f"{dataset}/{split}"
        if exact is not None:
            mine = exact.filter((pl.col("dataset") == dataset) & (pl.col("split") == split)).collect()
            excluded[label] |= set(mine["pair_id"].to_list())
        elif label in splits:  # no pair list: every pair of a split it trained on is suspect
            excluded[label] |= set(catalog.read_split(dataset, split)["pair_id"].to_list())
    return excluded
