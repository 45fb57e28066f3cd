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
from simpair.evaluation.file.validate import DEFAULT_LABEL_COLUMN, describe_drops, drop_rows, validate_pairs
from simpair.evaluation.file.zero_shot import score_zero_shot
from simpair.metrics.bootstrap import paired_bootstrap, verdict_line
from simpair.models.metadata import ModelMetadata
from simpair.runtime.model_ref import resolve_model_ref
from simpair.runtime.predictors import load_predictor
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
    seen, checked, unchecked = training_overlap(home_path, model_dir, meta, data.text_a, data.text_b)
    overlap = {
        "found": int(seen.sum()),
        "excluded": exclude_trained,
        "checked": checked,
        "not_checked": unchecked,
    }
    if exclude_trained and seen.any():
        if seen.all():
            raise FileEvalError(
                f"{path}: all {len(seen)} valid pairs are pairs {ref.label} was trained on; "
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

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(out_dir) if out_dir else home_path / "evaluations" / f"file-{path.stem}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)

    predictor = load_predictor(model_dir)
    raw = predictor.predict_raw(data.text_a, data.text_b, batch_size=batch_size)
    scored = predictor.from_raw(raw)
    model_score = np.asarray(scored.get("probability", scored["score"]), dtype=np.float64)
    truncated = int(np.asarray(predictor.truncated(data.text_a, data.text_b)).sum())
    # a frozen threshold exists only for paraphrase models; an sts model's 0.5 was never chosen on anything
    model_threshold = float(meta.threshold) if meta.task == "paraphrase" else None
    model_metrics = file_metrics(kind, model_score, data.gold, model_threshold)
    model_metrics["truncated"] = truncated

    zs: dict[str, Any] | None = None
    zs_raw: np.ndarray | None = None
    zs_score: np.ndarray | None = None
    if zero_shot:
        baseline = score_zero_shot(meta, home_path, data, kind, batch_size)
        zs, zs_raw, zs_score = baseline.summary, baseline.raw, baseline.score

    headline = HEADLINE[kind]
    interval = None
    deltas: dict[str, float] = {}
    if zs is not None and zs_raw is not None:
        deltas = {
            k: float(model_metrics[k] - zs["metrics"][k])
            for k in MODEL_KEYS[kind]
            if k in zs["metrics"] and model_metrics.get(k) is not None
        }
        interval = paired_bootstrap(kind, model_score, zs_raw.astype(np.float64), data.gold)
    verdict = verdict_line(
        headline,
        float(model_metrics[headline]),
        float(zs["metrics"][headline]) if zs is not None else None,
        interval,
        len(data.gold),
    )

    plots = draw_plots(
        kind, out, model_dir.name, model_score, data.gold, model_threshold, model_metrics, zs_score, zs
    )
    predictions = {
        "row": data.rows,
        **({"pair_id": data.pair_id} if data.pair_id is not None else {}),
        "text_a": data.text_a,
        "text_b": data.text_b,
        "gold": data.gold_raw,
        **({"gold_01": data.gold} if kind == "graded" else {}),
        "model_raw": raw,
        **{f"model_{k}": v for k, v in scored.items()},
    }
    if zs_raw is not None and zs_score is not None:
        predictions |= {"zero_shot_cosine": zs_raw, "zero_shot_score": zs_score.astype(np.float32)}
        if zs is not None and zs["threshold"] is not None:
            predictions["zero_shot_label"] = (zs_score >= zs["threshold"]).astype(np.int8)
    pred_path = out / "predictions.parquet"
    pl.DataFrame(predictions).write_parquet(pred_path)
    if data.drops.height:
        data.drops.write_parquet(out / "dropped.parquet")

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
        "threshold": model_threshold,
        "model_metrics": model_metrics,
        "zero_shot": zs,
        "headline": headline,
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
