"""`evaluate --file`, step by step: read, validate, drop trained-on pairs, score, compare, report.

Each step lives in its own module of this package; this one only runs them in order and writes the
outputs (metrics.json, report.md, PNGs, predictions.parquet, dropped.parquet) into one folder.
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

from simpair.evaluation.file.leakage import training_overlap
from simpair.evaluation.file.metrics import HEADLINE, MODEL_KEYS, file_metrics
from simpair.evaluation.file.plots import draw_plots
from simpair.evaluation.file.read import FileEvalError, read_pairs_file
from simpair.evaluation.file.report import finite, render_file_report
from simpair.evaluation.file.validate import (
    DEFAULT_LABEL_COLUMN,
    LabelledRows,
    describe_drops,
    drop_rows,
    validate_pairs,
)
from simpair.evaluation.file.zero_shot import ZeroShotScores, score_zero_shot
from simpair.metrics.bootstrap import paired_bootstrap, verdict_line
from simpair.models.metadata import ModelMetadata
from simpair.runtime.loader import load_predictor
from simpair.runtime.model_ref import resolve_model_ref
from simpair.settings import home_dir

log = logging.getLogger(__name__)


@dataclass
class FileEvalResult:
    metrics: dict[str, Any]
    report_path: Path
    out_dir: Path
    predictions_path: Path
    plot_paths: list[Path] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    verdict: str = ""


@dataclass
class _ModelScores:
    """The model's outputs on the kept rows and their metrics against the file's labels."""

    raw: np.ndarray
    scored: dict[str, np.ndarray]
    score: np.ndarray  # the probability (paraphrase) or score (sts), as float64
    threshold: float | None
    metrics: dict[str, Any]


def _drop_trained_pairs(
    data: LabelledRows,
    home: Path,
    model_dir: Path,
    meta: ModelMetadata,
    label: str,
    path: Path,
    exclude: bool,
) -> tuple[LabelledRows, dict[str, Any]]:
    """Find the rows the model was trained on; drop them (or, with `exclude=False`, only count them).

    Returns the rows left and the overlap summary for metrics.json.
    """
    seen, checked, unchecked = training_overlap(home, model_dir, meta, data.text_a, data.text_b)
    overlap = {"found": int(seen.sum()), "excluded": exclude, "checked": checked, "not_checked": unchecked}
    if exclude and seen.any():
        if seen.all():
            raise FileEvalError(
                f"{path}: all {len(seen)} valid pairs are pairs {label} was trained on; "
                "nothing unseen is left to evaluate (--no-exclude-leaked keeps them)"
            )
        data = drop_rows(data, seen, "in_training_data")
    if data.dropped:  # counted in the result, the report and dropped.parquet; the log says it once
        log.info(
            "%s: dropped %d of %d rows (%s)",
            path,
            data.drops.height,
            data.rows_read,
            describe_drops(data.dropped),
        )
    return data, overlap


def _score_with_model(
    model_dir: Path, meta: ModelMetadata, data: LabelledRows, kind: str, batch_size: int
) -> _ModelScores:
    """Score the kept rows with the model and measure it at its own frozen threshold."""
    predictor = load_predictor(model_dir)
    raw = predictor.predict_raw(data.text_a, data.text_b, batch_size=batch_size)
    scored = predictor.from_raw(raw)
    score = np.asarray(scored.get("probability", scored["score"]), dtype=np.float64)
    truncated = int(np.asarray(predictor.truncated(data.text_a, data.text_b)).sum())
    # a frozen threshold exists only for paraphrase models; an sts model's 0.5 was never chosen on anything
    threshold = float(meta.threshold) if meta.task == "paraphrase" else None
    metrics = file_metrics(kind, score, data.gold, threshold)
    metrics["truncated"] = truncated
    return _ModelScores(raw, scored, score, threshold, metrics)


def _compare_with_zero_shot(
    kind: str, model: _ModelScores, baseline: ZeroShotScores | None, gold: np.ndarray
) -> tuple[dict[str, float], tuple[float, float] | None, str]:
    """The model's metric gains over its zero-shot backbone, the paired bootstrap interval and the verdict."""
    headline = HEADLINE[kind]
    interval = None
    deltas: dict[str, float] = {}
    baseline_value = None
    if baseline is not None:
        zs_metrics = baseline.summary["metrics"]
        deltas = {
            k: float(model.metrics[k] - zs_metrics[k])
            for k in MODEL_KEYS[kind]
            if k in zs_metrics and model.metrics.get(k) is not None
        }
        interval = paired_bootstrap(kind, model.score, baseline.raw.astype(np.float64), gold)
        baseline_value = float(zs_metrics[headline])
    verdict = verdict_line(headline, float(model.metrics[headline]), baseline_value, interval, len(gold))
    return deltas, interval, verdict


def _write_predictions(
    out: Path, data: LabelledRows, kind: str, model: _ModelScores, baseline: ZeroShotScores | None
) -> Path:
    """predictions.parquet (both models' scores per kept row) and, if rows were dropped, dropped.parquet."""
    predictions = {
        "row": data.rows,
        **({"pair_id": data.pair_id} if data.pair_id is not None else {}),
        "text_a": data.text_a,
        "text_b": data.text_b,
        "gold": data.gold_raw,
        **({"gold_01": data.gold} if kind == "graded" else {}),
        "model_raw": model.raw,
        **{f"model_{k}": v for k, v in model.scored.items()},
    }
    if baseline is not None:
        zs_score = baseline.score
        predictions |= {"zero_shot_cosine": baseline.raw, "zero_shot_score": zs_score.astype(np.float32)}
        if baseline.summary["threshold"] is not None:
            predictions["zero_shot_label"] = (zs_score >= baseline.summary["threshold"]).astype(np.int8)
    pred_path = out / "predictions.parquet"
    pl.DataFrame(predictions).write_parquet(pred_path)
    if data.drops.height:
        data.drops.write_parquet(out / "dropped.parquet")
    return pred_path


def evaluate_file(
    model_ref: str | Path | None,
    path: str | Path,
    label_kind: str | None = None,
    label_column: str | None = None,
    score_range: tuple[float, float] | None = None,
    home: str | Path | None = None,
    out_dir: str | Path | None = None,
    batch_size: int = 64,
    zero_shot: bool = True,
    exclude_trained: bool = True,
) -> FileEvalResult:
    """Score a labelled file with a model (any kind) and its untrained backbone; write the report.

    `label_kind` defaults to the model's task (paraphrase: binary, sts: graded). Pairs the model was
    trained on (as far as its training data is ingested in `home`) are dropped as `in_training_data`,
    or with `exclude_trained=False` kept and counted. Writes metrics.json, report.md, PNG plots,
    predictions.parquet (both models' scores per kept row) and, when rows were dropped, dropped.parquet
    (row, reason, column, value) under `out_dir` (default `<home>/evaluations/file-<stem>-<time>/`).
    """
    home_path = home_dir(home)
    path = Path(path).expanduser()
    ref = resolve_model_ref(str(model_ref) if model_ref is not None else None, home_path, when_none="latest")
    model_dir = Path(ref.local_dir)
    meta = ModelMetadata.read(model_dir)
    kind = label_kind or ("binary" if meta.task == "paraphrase" else "graded")
    data = validate_pairs(read_pairs_file(path), path, kind, label_column, score_range)
    data, overlap = _drop_trained_pairs(data, home_path, model_dir, meta, ref.label, path, exclude_trained)

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(out_dir) if out_dir else home_path / "evaluations" / f"file-{path.stem}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)

    model = _score_with_model(model_dir, meta, data, kind, batch_size)
    baseline = score_zero_shot(meta, home_path, data, kind, batch_size) if zero_shot else None
    zs = baseline.summary if baseline is not None else None
    deltas, interval, verdict = _compare_with_zero_shot(kind, model, baseline, data.gold)

    plots = draw_plots(
        kind, out, model_dir.name, model.score, data.gold, model.threshold, model.metrics,
        baseline.score if baseline is not None else None, zs,
    )  # fmt: skip
    pred_path = _write_predictions(out, data, kind, model, baseline)

    summary: dict[str, Any] = {
        "file": str(path.resolve()),
        "label_kind": kind,
        "label_column": label_column or DEFAULT_LABEL_COLUMN[kind],
        "range": list(data.score_range) if data.score_range else None,
        "rows_read": data.rows_read,
        "evaluated": len(data.gold),
        "dropped": data.dropped,
        "training_overlap": overlap,
        "model": ref.label,
        "model_dir": str(model_dir),
        "kind": meta.kind,
        "task": meta.task,
        "objective": meta.objective,
        "threshold": model.threshold,
        "model_metrics": model.metrics,
        "zero_shot": zs,
        "headline": HEADLINE[kind],
        "deltas": deltas,
        "bootstrap_interval": list(interval) if interval else None,
        "verdict": verdict,
    }
    (out / "metrics.json").write_text(json.dumps(finite(summary), indent=2, sort_keys=True) + "\n")
    report = out / "report.md"
    report.write_text(render_file_report(summary, plots, out))
    log.info(
        "evaluated %s on %s: %d pairs, %d dropped; %s",
        ref.label,
        path,
        len(data.gold),
        data.drops.height,
        verdict,
    )
    return FileEvalResult(summary, report, out, pred_path, plots, data.dropped, verdict)
