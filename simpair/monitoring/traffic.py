"""A scoring run's traffic profile: one partial per chunk, merged at the run's end and checked for drift.

Each `score-chunk` profiles the rows it scored (`chunk_profile`): token lengths, rare pieces, scores,
the positive rate at the model's threshold and the chunk's health counts (rows in, rejected,
truncated, pairs repeated within the chunk), saved under the run's monitor folder
(`<out>/_monitor/<model>/<version>/<run_id>/chunks/`). A profile is fixed-size (fixed-edge histograms
and counters), so a chunk of 1k or 100k rows writes the same few kilobytes, and the run's end never
holds more than two profiles at once.

Bi-encoders (and a cascade's bi stage) also need sentence vectors. Re-encoding the traffic would cost
a second forward pass, so each chunk keeps only a hash-chosen sample of its texts (`texts.json`, at
most `SAMPLE_SIZE`); the run's end keeps the `SAMPLE_SIZE` texts with the smallest hashes over all
chunks, which is the sample one pass over the whole run would have chosen, and encodes those few
hundred once, with the model the run loaded, when the reference has vectors to compare them with.

`profile_traffic` (the `profile-traffic` step, after the files are finalized) merges the partials of
the files this run scored (a quarantined file's chunks are left out), adds the run's quarantined rows
and pairs/s, stores the traffic profile (`simpair.monitoring.store`), finds the version's reference
(`simpair.monitoring.lookup.find_reference`) and the last nights of the same version, compares
them (`simpair.monitoring.drift.compare`), writes `monitor.json` and the PNGs beside the profile, and
logs the figures on an MLflow monitoring run tied to the version when the model is a registry
version. A model with no reference gets the run's health rows only (`monitor.json`, no plots) and
one line saying so.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np

from simpair.atomic import commit, temp_path
from simpair.monitoring.drift import REPORT_FILE, DriftReport, compare, write_report
from simpair.monitoring.policy import MonitorPolicy
from simpair.monitoring.profile import (
    SAMPLE_SIZE,
    Profile,
    ProfileBuilder,
    VectorSample,
    _bi_member,
    _text_priority,
    _tokenizer_of,
)
from simpair.monitoring.store import REFERENCE, history, run_dir, save_traffic, version_dir
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import RuntimeOptions
from simpair.stages import step

log = logging.getLogger(__name__)

CHUNKS_DIR = "chunks"  # inside a run's monitor folder: one partial profile per scored chunk
TEXTS_FILE = "texts.json"  # beside a chunk's partial: its sampled texts (bi-encoders), for the run's vectors


def chunk_dir(out: str | Path, model: ModelRef, run_id: str, sha256: str, idx: int) -> Path:
    """Where chunk `idx` of the batch `sha256` keeps its partial profile in this run."""
    return run_dir(out, model.name, model.version, run_id) / CHUNKS_DIR / f"{sha256[:16]}-{idx:05d}"


def _threshold(predictor: Any) -> float | None:
    """The predictor's label threshold as the reference uses it (None when it has none)."""
    value = getattr(predictor, "threshold", None)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def chunk_profile(
    predictor: Any,
    model: ModelRef,
    run_id: str,
    folder: Path,
    text_a: Sequence[str],
    text_b: Sequence[str],
    scores: np.ndarray,
    health: dict[str, float],
) -> str:
    """Profile one chunk's scored rows into `folder` (its sampled texts beside); returns the folder.

    `health`: the chunk's counts (`rows_in`, `rejected`, `truncated`, `duplicates`).
    """
    form: Literal["cross", "bi"] = "bi" if predictor.kind == "bi" else "cross"
    builder = ProfileBuilder(
        _tokenizer_of(predictor), int(predictor.max_length), form, _threshold(predictor), "traffic",
        model.name, model.version,
    )  # fmt: skip
    builder.add(list(text_a), list(text_b), scores)
    bi = _bi_member(predictor)
    if bi is not None and form == "cross":  # a cascade's bi stage: its texts are sampled all the same
        builder._sample_texts(text_a, text_b)
    builder.set_health(**health)
    profile = builder.finish()
    profile.run_id = run_id
    shutil.rmtree(folder, ignore_errors=True)  # a retried chunk overwrites its partial whole
    profile.save(folder)
    if bi is not None:
        (folder / TEXTS_FILE).write_text(json.dumps(builder.sampled_texts()), encoding="utf-8")
    return str(folder)


def duplicates(text_a: Sequence[str], text_b: Sequence[str]) -> int:
    """Rows of a chunk whose (a, b) pair came earlier in the same chunk."""
    return len(text_a) - len(set(zip(text_a, text_b, strict=True)))


@dataclass(frozen=True)
class MonitorOutcome:
    """What a run's monitoring wrote and found: the scoring summary's monitor fields."""

    folder: str | None = None  # the run's monitor folder: profile.json, monitor.json, PNGs
    report: str | None = None  # its monitor.json
    alarms: int = 0
    note: str | None = None  # one line: the verdict, or why drift was not checked
    markdown: str | None = None  # the drift table (the Prefect artifact)
    alarm_lines: list[str] = field(default_factory=list)
    mlflow_run_id: str | None = None


def _sampled_vectors(
    parts: Sequence[Path], model: ModelRef, seed: int, k: int, runtime: RuntimeOptions | None, precision: str
) -> VectorSample | None:
    """The run's vector sample: the k texts with the smallest hashes over every chunk, encoded once by
    the run's own model (`load_for_run`: the copy the chunks of this process already loaded)."""
    texts: dict[int, str] = {}
    for part in parts:
        path = part / TEXTS_FILE
        if path.is_file():
            for text in json.loads(path.read_text(encoding="utf-8")):
                texts[_text_priority(text, seed)] = text
    if not texts:
        return None
    from simpair.runtime.loader import load_for_run

    chosen = [texts[p] for p in sorted(texts)[:k]]
    bi = _bi_member(load_for_run(model.local_dir, runtime or RuntimeOptions(), precision))
    if bi is None:
        return None
    return VectorSample(k, seed).add(np.asarray(bi.embed(chosen), dtype=np.float32))


def merge_parts(
    parts: Sequence[str],
    model: ModelRef,
    vectors: bool = True,
    runtime: RuntimeOptions | None = None,
    precision: str = "fp32",
) -> Profile | None:
    """The chunks' partial profiles as one (None when there is none), with the run's vector sample
    when `vectors` (what the reference can be compared on: a reference without vectors needs none)."""
    folders = [Path(p) for p in parts if (Path(p) / "profile.json").is_file()]
    merged: Profile | None = None
    for folder in folders:
        part = Profile.load(folder)
        merged = part if merged is None else merged.merge(part)
    if merged is not None and vectors:
        k = merged.vector_k or SAMPLE_SIZE
        sample = _sampled_vectors(folders, model, merged.vector_seed, k, runtime, precision)
        if sample is not None:
            merged.vectors, merged.vector_seen = sample, sample.seen
    return merged


@step("profile-traffic", run_name="profile-traffic-{run_id}")
def profile_traffic(
    out: Path,
    run_id: str,
    model: ModelRef,
    parts: list[str],
    health: dict[str, float],
    policy: MonitorPolicy,
    home: Path | None = None,
    runtime: RuntimeOptions | None = None,
    precision: str = "fp32",
) -> MonitorOutcome:
    """The run's traffic profile, its drift report against the version's reference and last nights,
    and its MLflow monitoring run; see the module docstring.

    `parts`: the partial profiles of the chunks whose files this run scored; `health`: the run's
    `quarantined` rows, the rows of quarantined files (added to `rows_in`) and its `pairs_per_s`.
    `runtime` and `precision`: the run's, for encoding a bi-encoder's sampled texts with the model the
    run already loaded (vectors within ~1e-3 of fp32's even in int8: nothing a two-sample test sees).
    Monitoring watches the run; it never fails it: the outputs and the ledger are committed by now, so
    any fault here becomes the summary's one-line note instead.
    """
    try:
        from simpair.monitoring.lookup import NO_REFERENCE, find_reference

        out = Path(out)
        if not parts:
            return MonitorOutcome(note="nothing scored in this run: no traffic profile")
        reference = find_reference(model, home, version_dir(out, model.name, model.version) / REFERENCE)
        # the few hundred sampled texts are encoded only when there is a reference vector sample to test
        with_vectors = reference is not None and reference.vectors is not None
        traffic = merge_parts(parts, model, with_vectors, runtime, precision)
        if traffic is None:
            return MonitorOutcome(note="nothing scored in this run: no traffic profile")
        quarantined = float(health.get("quarantined", 0.0))
        traffic.health["rows_in"] = traffic.health.get("rows_in", 0.0) + quarantined
        traffic.health["quarantined"] = quarantined
        traffic.health["pairs_per_s"] = float(health.get("pairs_per_s", 0.0))
        traffic.run_id = run_id
        folder = save_traffic(traffic, out)
        shutil.rmtree(folder / CHUNKS_DIR, ignore_errors=True)
        if reference is None:
            past: list[Profile] = []  # health only: drift needs the version's own reference
        elif policy.history_nights:
            past = history(out, model.name, model.version, timedelta(days=policy.history_nights + 1))
        else:
            past = []
        report = compare(traffic, reference, past, policy)
        if reference is not None:
            written = write_report(report, traffic, reference, past, folder)
        else:  # health rows only: no distribution to plot, and no plotting library loaded for nothing
            written = [_write_json(report, folder / REPORT_FILE)]
        note = _verdict(report) if reference is not None else f"{NO_REFERENCE} ({_verdict(report)})"
        if reference is None:
            print(NO_REFERENCE)
        lines = [f"monitor alarm: {row.describe()}; run {run_id} of {model.label}" for row in report.alarms]
        mlflow_run = _log_to_mlflow(home, model, run_id, report, traffic, written)
        return MonitorOutcome(
            folder=str(folder), report=str(written[0]), alarms=len(report.alarms), note=note,
            markdown=report.to_markdown(), alarm_lines=lines, mlflow_run_id=mlflow_run,
        )  # fmt: skip
    except Exception as exc:  # a damaged past profile, a plotting or tracking fault: the scores stand
        note = f"drift not checked: {type(exc).__name__}: {exc}"
        print(note)
        return MonitorOutcome(note=note)


def _write_json(report: DriftReport, path: Path) -> Path:
    tmp = temp_path(path)
    tmp.write_text(report.to_json(), encoding="utf-8")
    commit(tmp, path)
    return path


def _verdict(report: DriftReport) -> str:
    """`no alarm over 14 checks, ...`, or the alarms named (the first three): the summary's one line."""
    what = f"{len(report.alarms)} alarm(s)" if report.alarms else "no alarm"
    named = "; ".join(row.describe() for row in report.alarms[:3])
    more = "; ..." if len(report.alarms) > 3 else ""
    verdict = f"{what} over {len(report.rows)} checks, {report.history_nights} past run(s) of this version"
    return f"{verdict}: {named}{more}" if named else verdict


def monitor_metrics(report: DriftReport, traffic: Profile) -> dict[str, float]:
    """The figures logged on the monitoring run: each row's value (`<against>.<statistic>.<test>`),
    the alarm count and the run's health rates."""
    metrics = {
        f"{row.against}.{row.statistic}.{row.test}": float(row.value)
        for row in report.rows
        if not math.isnan(row.value)
    }
    metrics["alarms"] = float(len(report.alarms))
    metrics["pairs"] = float(traffic.n_pairs)
    for name in ("rejected", "quarantined", "duplicates", "truncated"):
        rate = traffic.rate(name)
        if not math.isnan(rate):
            metrics[f"health.{name}_rate"] = rate
    if traffic.health.get("pairs_per_s"):
        metrics["health.pairs_per_s"] = float(traffic.health["pairs_per_s"])
    return metrics


def _log_to_mlflow(
    home: Path | None, model: ModelRef, run_id: str, report: DriftReport, traffic: Profile, files: list[Path]
) -> str | None:
    """A monitoring run tied to the version (registry versions only: a plain folder has no tracking
    store of its own). A store that cannot be written is reported in one line; the scores stand."""
    if home is None or model.version.startswith("local-") or not model.run_id:
        return None
    from simpair.registry.monitoring import log_monitoring_run

    try:
        return log_monitoring_run(
            Path(home), model.name, model.version, run_id, monitor_metrics(report, traffic), files,
            tags={"simpair.model_run_id": model.run_id, "simpair.monitor_alarms": str(len(report.alarms))},
        )  # fmt: skip
    except Exception as exc:  # the tracking store is down: the report is on disk all the same
        print(f"monitoring run not logged to MLflow ({exc}); the report is in {files[0].parent}")
        return None
