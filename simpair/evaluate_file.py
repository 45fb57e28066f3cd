"""Evaluate a model on a user's own labelled file, beside the untrained backbone's zero-shot figure.

A user with their own pairs wants to know whether fine-tuning helped on *their* data without ingesting
it into the catalog first, so this reads the file directly (Parquet, CSV or TSV), validates it the way
the scoring-input contract does (`text_a`/`text_b` required; null or blank texts are dropped, never
scored) plus the labels, and reports the same metrics, plots and markdown as `simpair.evaluate`.

Why a zero-shot column: a model's number alone does not say whether training was worth it; the same
untrained backbone the promotion gate uses as its first bar (`simpair.registry.gate_baseline`) is
scored on the same rows, and the verdict rests on a paired bootstrap of the difference, so a gain that
a different draw of the same few hundred pairs would erase is called unclear instead of a win.

Thresholds are never tuned on the file: the model applies its own frozen (dev) threshold; the
zero-shot baseline has one only when a dataset the model trained on is ingested in this home (picked on
its training split, as the gate does), otherwise it gets threshold-free figures (ROC-AUC) only.
It sits above `model_ref` and `registry` because it resolves registry refs and builds the baseline.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from scipy.stats import rankdata

from simpair.catalog import Catalog
from simpair.evaluation.binary_classification import binary_metrics
from simpair.evaluation.graded_similarity import graded_metrics
from simpair.evaluation.leaked_pairs import trained_pairs
from simpair.evaluation.plots import confusion_matrix_png, histogram_png, scatter_png
from simpair.ingest.clean import CleanStats, clean_text
from simpair.model_ref import resolve_model_ref
from simpair.models.metadata import ModelMetadata
from simpair.pairs import pair_key
from simpair.predictors import load_predictor
from simpair.settings import home_dir

log = logging.getLogger(__name__)

LabelKind = Literal["graded", "binary"]
LABEL_KINDS: tuple[str, ...] = ("graded", "binary")
DEFAULT_LABEL_COLUMN = {"binary": "label", "graded": "score"}
TEXT_COLUMNS = ("text_a", "text_b")
HEADLINE = {"graded": "spearman", "binary": "roc_auc"}
BOOTSTRAP_ROUNDS = 1000
# differences below this are float noise (the same weights scored twice differ by ~1e-9), not an effect
NOISE = 1e-6
MODEL_KEYS = {
    "binary": ("accuracy", "f1", "precision", "recall", "roc_auc"),
    "graded": ("spearman", "pearson", "mse", "mae"),
}


class FileEvalError(ValueError):
    """A file that cannot be evaluated as asked; `option` names the command-line option to fix."""

    def __init__(self, message: str, option: str = "--file") -> None:
        super().__init__(message)
        self.option = option


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
class _Labelled:
    """The rows that survived validation, in file order, and why the others were dropped."""

    rows: np.ndarray  # 0-based row numbers in the file
    text_a: list[str]
    text_b: list[str]
    gold_raw: np.ndarray  # labels as written in the file
    gold: np.ndarray  # binary: 0/1 ints; graded: rescaled to 0-1
    score_range: tuple[float, float] | None
    rows_read: int
    dropped: dict[str, int]
    drops: pl.DataFrame  # row, reason, column, value
    pair_id: list[Any] | None


def read_pairs_file(path: Path) -> pl.DataFrame:
    """Parquet, CSV or TSV by suffix; any reader failure becomes one error that names the file."""
    if not path.exists():
        raise FileEvalError(f"{path}: no such file")
    if path.is_dir():
        raise FileEvalError(f"{path}: a folder, expected a .parquet, .csv or .tsv file")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path)
        if suffix == ".csv":
            return pl.read_csv(path, infer_schema_length=None)
        if suffix in (".tsv", ".tab"):
            # STS-style TSVs hold unbalanced quotes inside sentences: read them as plain characters
            return pl.read_csv(path, separator="\t", quote_char=None, infer_schema_length=None)
    except Exception as exc:  # polars raises ComputeError/NoDataError/...: the user needs the file named
        raise FileEvalError(f"{path}: not a readable {suffix[1:]} file: {type(exc).__name__}: {exc}") from exc
    raise FileEvalError(f"{path}: unknown file type {suffix or '(no suffix)'!r}; use .parquet, .csv or .tsv")


def validate_pairs(
    frame: pl.DataFrame,
    path: Path,
    label_kind: str,
    label_column: str | None = None,
    score_range: tuple[float, float] | None = None,
) -> _Labelled:
    """Keep the rows that can be scored and judged; count every dropped row under its reason.

    Reasons: `non_utf8`, `null_text`, `blank_text` (a text is unreadable, missing or only whitespace),
    `label_missing`, `label_not_numeric` (also NaN, infinity), `label_not_binary` (other than 0/1),
    `label_out_of_range` (graded labels outside --range). A graded file without --range must already
    be on 0-1: guessing the scale from the data would silently rescale a 0-5 file that tops out at 4.
    """
    if label_kind not in LABEL_KINDS:
        raise FileEvalError(
            f"label kind must be one of {', '.join(LABEL_KINDS)}, got {label_kind!r}", "--label-kind"
        )
    column = label_column or DEFAULT_LABEL_COLUMN[label_kind]
    option = "--label-column" if label_column else "--file"
    for name in (*TEXT_COLUMNS, column):
        if name not in frame.columns:
            hint = "" if name in TEXT_COLUMNS else f" (the {label_kind} label column; --label-column NAME)"
            raise FileEvalError(
                f"{path}: missing column {name!r}{hint}; columns: {', '.join(frame.columns) or '(none)'}",
                "--file" if name in TEXT_COLUMNS else option,
            )
    if frame.height == 0:
        raise FileEvalError(f"{path}: the file has zero rows")
    if score_range is not None:
        low, high = float(score_range[0]), float(score_range[1])
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise FileEvalError(f"range must be MIN MAX with MIN < MAX, got {low} {high}", "--range")
        if label_kind != "graded":
            raise FileEvalError("--range applies to graded labels only (--label-kind graded)", "--range")

    texts = {name: _as_text(frame[name]) for name in TEXT_COLUMNS}
    raw_label = frame[column]
    gold_raw = raw_label.cast(pl.Float64, strict=False).to_numpy()  # not a number -> null -> NaN
    n = frame.height
    reason = np.full(n, "", dtype=object)
    where = np.full(n, "", dtype=object)

    def mark(mask: np.ndarray, why: str, col: str) -> None:
        fresh = mask & (reason == "")  # the first problem found names the row
        reason[fresh] = why
        where[fresh] = col

    for name in TEXT_COLUMNS:
        values, written = texts[name], frame[name].is_null().to_numpy()
        mark(values.is_null().to_numpy() & ~written, "non_utf8", name)  # bytes that are no text
        mark(written, "null_text", name)
        mark((values.str.strip_chars().str.len_chars() == 0).fill_null(False).to_numpy(), "blank_text", name)
    mark(raw_label.is_null().to_numpy(), "label_missing", column)
    mark(~np.isfinite(gold_raw), "label_not_numeric", column)  # text, NaN or infinity (nulls marked above)
    valid = np.nan_to_num(gold_raw, nan=0.0, posinf=0.0, neginf=0.0)  # only rows already marked change
    if label_kind == "binary":
        mark(~np.isin(valid, (0.0, 1.0)), "label_not_binary", column)
    else:
        if score_range is None:
            usable = valid[reason == ""]
            if usable.size and (usable.min() < 0.0 or usable.max() > 1.0):
                raise FileEvalError(
                    f"{path}: column {column!r} spans {usable.min():g} to {usable.max():g}, not 0-1: "
                    "pass the scale it is written on, e.g. --range 0 5",
                    "--range",
                )
            score_range = (0.0, 1.0)
        low, high = score_range
        mark((valid < low) | (valid > high), "label_out_of_range", column)

    keep = reason == ""
    dropped = dict(sorted(Counter(reason[~keep].tolist()).items()))
    bad_rows = np.flatnonzero(~keep)
    shown = [frame[str(where[r])][int(r)] for r in bad_rows]  # the offending cell, as written
    drops = pl.DataFrame(
        {
            "row": bad_rows.astype(np.int64),
            "reason": pl.Series(reason[~keep].tolist(), dtype=pl.String),
            "column": pl.Series(where[~keep].tolist(), dtype=pl.String),
            "value": pl.Series([None if v is None else str(v) for v in shown], dtype=pl.String),
        }
    )
    if not keep.any():
        raise FileEvalError(f"{path}: none of its {n} rows can be evaluated ({_describe_drops(dropped)})")
    kept_raw = gold_raw[keep]
    if label_kind == "binary":
        gold = kept_raw.astype(np.int64)
    else:
        low, high = score_range  # type: ignore[misc]
        gold = (kept_raw - low) / (high - low)
    mask = pl.Series(keep)
    pair_id = frame["pair_id"].filter(mask).to_list() if "pair_id" in frame.columns else None
    return _Labelled(
        rows=np.flatnonzero(keep).astype(np.int64),
        text_a=texts["text_a"].filter(mask).to_list(),
        text_b=texts["text_b"].filter(mask).to_list(),
        gold_raw=kept_raw,
        gold=gold,
        score_range=score_range if label_kind == "graded" else None,
        rows_read=n,
        dropped=dropped,
        drops=drops,
        pair_id=pair_id,
    )


def _as_text(column: pl.Series) -> pl.Series:
    """Strings as they are; bytes decoded as UTF-8, null where they are not (polars' cast would raise)."""
    if column.dtype != pl.Binary:
        return column.cast(pl.String, strict=False)

    def decode(raw: bytes | None) -> str | None:
        try:
            return None if raw is None else raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    return pl.Series(column.name, [decode(v) for v in column.to_list()], dtype=pl.String)


def _describe_drops(dropped: dict[str, int]) -> str:
    return ", ".join(f"{count} {why}" for why, count in dropped.items()) or "none dropped"


def _metrics(
    label_kind: str,
    score: np.ndarray,
    gold: np.ndarray,
    threshold: float | None,
    raw: np.ndarray | None = None,
) -> dict[str, Any]:
    """Binary: thresholded metrics only with a frozen threshold, ROC-AUC always; graded: correlations.

    `raw` (the zero-shot cosine) replaces the clipped 0-1 score for the threshold-free figures, so
    negative cosines, all clipped to 0, are not collapsed into one tie.
    """
    ranked = score if raw is None else raw
    if label_kind == "binary":
        if threshold is not None:
            out = binary_metrics(score, gold, threshold)
            if raw is not None:
                out["roc_auc"] = binary_metrics(raw, gold, threshold)["roc_auc"]
            return out
        auc = binary_metrics(ranked, gold, 0.5)["roc_auc"]
        return {"roc_auc": auc, "n": len(gold), "threshold": None}
    out = graded_metrics(ranked, gold)
    if raw is not None:  # an uncalibrated cosine is no 0-1 score: only its order and linearity count
        out = {k: out[k] for k in ("spearman", "pearson", "n")}
    return out


def _headline(label_kind: str, score: np.ndarray, gold: np.ndarray) -> float:
    """The verdict's metric alone (the bootstrap calls it thousands of times)."""
    if label_kind == "binary":  # Mann-Whitney U with average ranks: sklearn's ROC-AUC, ties included
        positive = gold == 1
        n_pos, n_neg = int(positive.sum()), int((~positive).sum())
        if n_pos == 0 or n_neg == 0:
            return float("nan")
        ranks = rankdata(score)
        return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    if np.ptp(score) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(np.corrcoef(rankdata(score), rankdata(gold))[0, 1])  # Spearman, without scipy's overhead


def paired_bootstrap(
    label_kind: str, model: np.ndarray, baseline: np.ndarray, gold: np.ndarray, rounds: int = BOOTSTRAP_ROUNDS
) -> tuple[float, float] | None:
    """95% interval of (model - zero-shot) headline metric over resamples of the same rows.

    Paired (both models scored on each resample) because the question is the difference on this
    population of pairs, and the two scores' errors are correlated through the shared rows.
    """
    rng = np.random.default_rng(0)
    n = len(gold)
    rounds = max(200, min(rounds, 20_000_000 // max(n, 1)))  # big files: fewer rounds, same seconds
    deltas = []
    for _ in range(rounds):
        idx = rng.integers(0, n, n)
        g = gold[idx]
        if label_kind == "binary" and len(np.unique(g)) < 2:
            continue
        d = _headline(label_kind, model[idx], g) - _headline(label_kind, baseline[idx], g)
        if math.isfinite(d):
            deltas.append(d)
    if len(deltas) < rounds // 2:
        return None
    low, high = np.percentile(deltas, [2.5, 97.5])
    return float(low), float(high)


def verdict_line(
    metric: str, model: float, baseline: float | None, interval: tuple[float, float] | None, n: int
) -> str:
    """One sentence a user can act on: helped, hurt, or no clear difference on this file."""
    if baseline is None:
        return f"model {metric} {model:.4f} on {n} pairs (zero-shot baseline not computed)"
    if not (math.isfinite(model) and math.isfinite(baseline)):
        why = "only one class among the labels" if metric == "roc_auc" else "constant labels or scores"
        return f"no verdict: {metric} is undefined on this file ({why})"
    delta = model - baseline
    figures = f"{metric} {model:.2f} vs zero-shot {baseline:.2f} ({delta:+.2f}"
    if interval is None:
        figures += f", {n} pairs)"
        word = "helped" if delta > NOISE else ("hurt" if delta < -NOISE else "made no difference")
        return f"fine-tuning {word} on this file: {figures}"
    figures += f", 95% interval {interval[0]:+.2f} to {interval[1]:+.2f} over {n} pairs)"
    if interval[0] > NOISE:
        return f"fine-tuning helped on this file: {figures}"
    if interval[1] < -NOISE:
        return f"fine-tuning hurt on this file: {figures}"
    return f"no clear difference on this file: {figures}"


def training_overlap(
    home: Path, model_dir: Path, meta: ModelMetadata, text_a: list[str], text_b: list[str]
) -> tuple[np.ndarray, list[str], list[str]]:
    """Which rows are pairs the model was trained on: (mask, splits checked, splits not ingested here).

    A figure on pairs the weights have seen says nothing about the user's data. Identity is ingest's
    (`pair_key` on cleaned texts, either order), against the model's exact training pairs when it lists
    them, else its whole training splits, read at the version it trained on when that is still here.
    """
    exact, splits = trained_pairs(model_dir, meta)
    by_split: dict[str, set[str] | None] = {}  # None: the whole split counts (no exact list)
    if exact is None:
        by_split = dict.fromkeys(splits)
    if exact is not None:
        for (dataset, split), ids in exact.collect().group_by("dataset", "split", maintain_order=True):
            by_split[f"{dataset}/{split}"] = set(ids["pair_id"].to_list())
    catalog = Catalog(home)
    known = set(catalog.datasets())
    keys: set[str] = set()
    checked, unchecked = [], []
    for label in sorted(by_split):
        dataset, _, split = label.partition("/")
        if dataset not in known or split not in catalog.splits(dataset):
            unchecked.append(label)
            continue
        version = meta.dataset_versions.get(dataset)
        frame = catalog.read_split(dataset, split, version if version in catalog.versions(dataset) else None)
        ids = by_split[label]
        if ids is not None:
            frame = frame.filter(pl.col("pair_id").is_in(list(ids)))
        keys.update(pair_key(a, b) for a, b in zip(frame["text_a"], frame["text_b"], strict=True))
        checked.append(label)
    if not keys:
        return np.zeros(len(text_a), dtype=bool), checked, unchecked
    stats = CleanStats()
    mask = np.fromiter(
        (
            pair_key(clean_text(a, stats), clean_text(b, stats)) in keys
            for a, b in zip(text_a, text_b, strict=True)
        ),
        dtype=bool,
        count=len(text_a),
    )
    return mask, checked, unchecked


def _drop_rows(data: _Labelled, mask: np.ndarray, reason: str) -> _Labelled:
    """The same rows less those in `mask`, each recorded in the drops table under `reason`."""
    keep = ~mask
    added = pl.DataFrame(
        {
            "row": data.rows[mask],
            "reason": [reason] * int(mask.sum()),
            "column": ["text_a+text_b"] * int(mask.sum()),
            "value": [a for a, m in zip(data.text_a, mask, strict=True) if m],
        },
        schema=data.drops.schema,
    )
    dropped = dict(data.dropped)
    dropped[reason] = dropped.get(reason, 0) + int(mask.sum())
    return _Labelled(
        rows=data.rows[keep],
        text_a=[t for t, k in zip(data.text_a, keep, strict=True) if k],
        text_b=[t for t, k in zip(data.text_b, keep, strict=True) if k],
        gold_raw=data.gold_raw[keep],
        gold=data.gold[keep],
        score_range=data.score_range,
        rows_read=data.rows_read,
        dropped=dict(sorted(dropped.items())),
        drops=pl.concat([data.drops, added]).sort("row"),
        pair_id=None if data.pair_id is None else [p for p, k in zip(data.pair_id, keep, strict=True) if k],
    )


def _zero_shot_threshold_dataset(home: Path, meta: ModelMetadata) -> str | None:
    """An ingested dataset the model trained on: the baseline's threshold is picked on its train split."""
    known = set(Catalog(home).datasets())
    for entry in meta.train_datasets:
        dataset = entry.split("/")[0]
        if dataset in known:
            return dataset
    return None


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
        data = _drop_rows(data, seen, "in_training_data")
    if data.dropped:  # counted in the result, the report and dropped.parquet; the log says it once
        log.info(
            "%s: dropped %d of %d rows (%s)",
            path,
            data.drops.height,
            data.rows_read,
            _describe_drops(data.dropped),
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
    model_metrics = _metrics(kind, model_score, data.gold, model_threshold)
    model_metrics["truncated"] = truncated

    zs: dict[str, Any] | None = None
    zs_raw: np.ndarray | None = None
    zs_score: np.ndarray | None = None
    if zero_shot:
        # the registry package brings MLflow in: only when a baseline is asked for
        from simpair.registry.gate_baseline import zero_shot_model

        threshold_dataset = (
            _zero_shot_threshold_dataset(home_path, meta) if meta.task == "paraphrase" else None
        )
        zs_dir = zero_shot_model(meta.backbone, meta.task, home_path, threshold_dataset=threshold_dataset)
        zs_meta = ModelMetadata.read(zs_dir)
        source = getattr(zs_meta, "threshold_source", None)
        zs_threshold = float(zs_meta.threshold) if source else None
        zs_predictor = load_predictor(zs_dir)
        zs_raw = zs_predictor.predict_raw(data.text_a, data.text_b, batch_size=batch_size)
        zs_score = np.asarray(zs_predictor.from_raw(zs_raw)["score"], dtype=np.float64)
        zs = {
            "backbone": meta.backbone,
            "model_dir": str(zs_dir),
            "threshold": zs_threshold,
            "threshold_source": source,
            "metrics": _metrics(kind, zs_score, data.gold, zs_threshold, raw=zs_raw.astype(np.float64)),
        }

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

    plots = _plots(
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
    (out / "metrics.json").write_text(json.dumps(_finite(summary), indent=2, sort_keys=True) + "\n")
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


def _finite(value: Any) -> Any:
    """JSON has no NaN: an undefined metric (one class, constant scores) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _plots(
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
        + (f" ({_describe_drops(summary['dropped'])}; see dropped.parquet)" if summary["dropped"] else ""),
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
