"""`evaluate_model`: score a saved model on ingested splits and write what the report shows.

Tokens come from the cache (`simpair.tokens`), the same ids training used, read through its
memory-mapped columns a batch at a time (`simpair.pair_tokens`): only the split's ids, labels and
scores are held whole, never its token ids. Composite models (stacks, cascades) score from the texts,
since each member tokenizes for itself.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from simpair.catalog import Catalog, CatalogError
from simpair.evaluation.splits.report import render_report
from simpair.evaluation.splits.split_metrics import PlotPlace, binary_split_metrics, graded_split_metrics
from simpair.metrics.binary_classification import binary_metrics
from simpair.metrics.graded_similarity import graded_metrics
from simpair.metrics.groups import compile_group_pattern, metrics_by_group, pair_groups
from simpair.models.inference import raw_outputs
from simpair.models.metadata import COMPOSITE_KINDS
from simpair.pair_tokens import PairTokens, open_pairs
from simpair.runtime.loader import load_predictor
from simpair.stages import step
from simpair.tokens import pretokenize
from simpair.training.leaked_pairs import leaked_pair_ids, trained_pairs

# what evaluation reads whole from a token-cache file (the ids are read a batch at a time)
SCALAR_COLUMNS = ["pair_id", "label", "score", "truncated"]

log = logging.getLogger(__name__)


@dataclass
class EvalResult:
    metrics: dict[str, Any]
    report_path: Path
    plot_paths: list[Path] = field(default_factory=list)
    excluded_counts: dict[str, int] = field(default_factory=dict)
    predictions_paths: list[Path] = field(default_factory=list)


def default_eval_splits(home: Path, metadata: Any) -> list[tuple[str, str]]:
    """The test-role splits of the datasets the model was trained on."""
    catalog = Catalog(home)
    out = []
    for dataset in sorted({s.split("/")[0] for s in metadata.train_datasets}):
        try:
            roles = catalog.splits(dataset)
        except CatalogError:
            continue
        out.extend((dataset, split) for split, role in roles.items() if role == "test")
    return out


def _raw_and_truncated(
    predictor: Any, frame: pl.DataFrame, pairs: PairTokens | None, batch_size: int
) -> tuple[np.ndarray, int]:
    """Raw outputs in frame order and the number of truncated pairs.

    Single models read the cached token ids (the same ids training used); a stacked model scores the
    texts through its members, each with its own tokenizer.
    """
    meta = predictor.meta
    if meta.kind in COMPOSITE_KINDS:
        a, b = frame["text_a"].to_list(), frame["text_b"].to_list()
        return predictor.predict_raw(a, b, batch_size=batch_size), int(predictor.truncated(a, b).sum())
    assert pairs is not None
    pad_id = predictor.tokenizer.pad_token_id or 0
    raw = raw_outputs(
        predictor.model, pairs, pad_id, predictor.device, predictor._dtype, meta.symmetric, batch_size
    )
    return raw, int(frame["truncated"].sum())


def _read_unleaked_split(
    catalog: Catalog,
    home: Path,
    predictor: Any,
    dataset: str,
    split: str,
    leakage: pl.DataFrame | None,
    trained: tuple[pl.LazyFrame | None, set[str]],
) -> tuple[pl.DataFrame, PairTokens | None, int]:
    """The split's rows (and cached token ids, for single models) without the pairs it leaks.

    `trained` is `trained_pairs(model_dir, meta)`: the exact pairs and the splits the model trained
    on. Returns the kept rows, their token ids (None for composite models) and how many were dropped.
    """
    meta = predictor.meta
    pairs = None
    if meta.kind in COMPOSITE_KINDS:  # members tokenize for themselves: score from texts
        frame = catalog.read_split(dataset, split)
    else:
        tokens = pretokenize(home, dataset, split, predictor.tokenizer, meta.max_length, meta.kind)
        frame = pl.read_parquet(tokens.path, columns=SCALAR_COLUMNS)
        pairs = open_pairs(tokens.path, meta.task, dataset, split)
    exact, splits = trained
    leaked = (
        leaked_pair_ids(leakage, dataset, split, train_splits=splits, train_pairs=exact)
        if leakage is not None
        else set()
    )
    # a boolean column, never a Python list per pair: memory stays flat in the split's size
    keep = ~frame["pair_id"].is_in(pl.Series(sorted(leaked), dtype=pl.String))
    excluded = int(len(frame) - keep.sum())
    frame = frame.filter(keep)
    if pairs is not None and excluded:  # no index array when nothing leaked
        pairs = pairs.subset(np.flatnonzero(keep.to_numpy()))
    return frame, pairs, excluded


def _evaluate_split(
    predictor: Any,
    frame: pl.DataFrame,
    pairs: PairTokens | None,
    excluded: int,
    where: PlotPlace,
    batch_size: int,
    grouping: Any,
    plots: list[Path],
) -> tuple[dict[str, Any], Path]:
    """Score one split's kept rows, measure them against whatever gold it has, write its predictions.

    `excluded` is the number of leaked rows already dropped. Returns the split's metrics and the path
    of `<split>-predictions.parquet`; the plots drawn are appended to `plots`.
    """
    meta = predictor.meta
    raw, truncated = _raw_and_truncated(predictor, frame, pairs, batch_size)
    scored = predictor.from_raw(raw)
    score = scored.get("probability", scored["score"])
    result: dict[str, Any] = {"evaluated": len(frame), "excluded_leaked": excluded, "truncated": truncated}
    has_labels = frame["label"].null_count() == 0 and len(frame) > 0
    has_scores = frame["score"].null_count() == 0 and len(frame) > 0
    if has_labels:
        gold = frame["label"].to_numpy().astype(np.int64)
        result.update(binary_split_metrics(meta, score, gold, where, plots))
    if has_scores:
        gold_score = frame["score"].to_numpy().astype(np.float64)
        result.update(graded_split_metrics(scored["score"], gold_score, has_labels, where, plots))
    if grouping is not None:
        result["by_group"] = _metrics_by_group(
            pair_groups(frame["pair_id"].to_list(), grouping),
            score,
            scored["score"],
            frame["label"].to_numpy().astype(np.int64) if has_labels else None,
            frame["score"].to_numpy().astype(np.float64) if has_scores else None,
            meta.threshold,
        )
    preds = pl.DataFrame({"pair_id": frame["pair_id"], "raw": raw, **{k: v for k, v in scored.items()}})
    pred_path = where.out / f"{where.slug}-predictions.parquet"
    preds.write_parquet(pred_path)
    return result, pred_path


@step("evaluate", tags=("gpu",), retries=1, retry_delay_seconds=10, profile_retries=True)
def evaluate_model(
    model_dir: str | Path,
    home: str | Path,
    datasets: list[tuple[str, str]] | None = None,
    exclude_leaked: bool = True,
    out_dir: str | Path | None = None,
    batch_size: int = 64,
    group_pattern: str | None = None,
) -> EvalResult:
    """Evaluate a saved model on ingested splits; writes metrics.json, report.md, PNGs, predictions.

    `group_pattern` (a regular expression over pair ids, first capture group = group) adds the same
    metrics per group of each split (`by_group`), e.g. per STS-B genre.
    """
    model_dir, home = Path(model_dir), Path(home)
    grouping = compile_group_pattern(group_pattern) if group_pattern is not None else None
    predictor = load_predictor(model_dir)
    meta = predictor.meta
    catalog = Catalog(home)
    datasets = list(datasets) if datasets else default_eval_splits(home, meta)
    if not datasets:
        raise ValueError(f"no evaluation splits given and none found for {model_dir}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(out_dir) if out_dir else home / "evaluations" / f"{model_dir.name}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)

    trained = trained_pairs(model_dir, meta)
    leakage = catalog.leakage() if exclude_leaked else None
    metrics: dict[str, Any] = {}
    excluded_counts: dict[str, int] = {}
    plots: list[Path] = []
    pred_paths: list[Path] = []
    for dataset, split in datasets:
        label = f"{dataset}/{split}"
        frame, pairs, excluded_counts[label] = _read_unleaked_split(
            catalog, home, predictor, dataset, split, leakage, trained
        )
        where = PlotPlace(out, model_dir.name, label)
        metrics[label], pred_path = _evaluate_split(
            predictor, frame, pairs, excluded_counts[label], where, batch_size, grouping, plots
        )
        pred_paths.append(pred_path)
        log.info(
            "evaluated %s on %s: %d pairs, %d leaked excluded",
            model_dir.name,
            label,
            len(frame),
            excluded_counts[label],
        )

    summary = {
        "model_dir": str(model_dir),
        "kind": meta.kind,
        "task": meta.task,
        "objective": meta.objective,
        "threshold": meta.threshold,
        "dataset_versions": {d: catalog.current_version(d) for d in sorted({d for d, _ in datasets})},
        "model_dataset_versions": dict(meta.dataset_versions),
        "splits": metrics,
        "group_pattern": group_pattern,
    }
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    report = out / "report.md"
    report.write_text(render_report(summary, plots, out))
    return EvalResult(summary, report, plots, excluded_counts, pred_paths)


def _metrics_by_group(
    groups: np.ndarray,
    probability: np.ndarray,
    score: np.ndarray,
    labels: np.ndarray | None,
    gold_score: np.ndarray | None,
    threshold: float,
) -> dict[str, dict[str, Any]]:
    """The split's metrics restricted to each group (the threshold stays the one chosen on dev)."""

    def metrics(mask: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {"evaluated": int(mask.sum())}
        if labels is not None:
            out.update(binary_metrics(probability[mask], labels[mask], threshold))
        if gold_score is not None:
            graded = graded_metrics(score[mask], gold_score[mask])
            out.update(graded if labels is None else {f"graded_{k}": v for k, v in graded.items()})
        return out

    return metrics_by_group(groups, metrics)
