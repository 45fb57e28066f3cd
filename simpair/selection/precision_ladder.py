"""The precision ladder: fp32 -> bf16 -> int8, measured once per model, the fastest safe rung chosen.

How much bf16 or int8 moves a model's decisions depends on its weights (a fine-tuned model with sharp
logits flips labels an untrained one never does), and how much faster each runs depends on the model
and the hardware, so neither is assumed: each rung scores the model's recorded dev split (never the
test split) next to fp32, and the check records the share of dev labels it flips, how far the dev
metric moves (paraphrase F1 at the model's threshold, STS Spearman), the largest score change, and its
speed against fp32 (`speed_ratio`: interleaved rounds after a warm-up, median and lower quartile, so
registering the same model twice on one machine gives the same verdict). The verdict records the host
facts it holds for (CPU flags, runtime versions); a scoring host that differs scores at fp32.
A rung is accepted within `Limits` (by default at most 0.5% of dev labels
flip and the metric moves by at most 0.002; a graded model has no labels, so only its metric counts);
bf16 is skipped where it is not native (`simpair.models.device.native_bf16`). `--precision auto`
scores in the fastest accepted rung.

Every rung must also be batch-invariant: a pair's score may not depend on what it is batched with. A
share of the dev pairs (`INVARIANCE_PAIRS`) is scored again on its own, shuffled, at a small batch
size (`INVARIANCE_BATCH`), and set against the same pairs' scores from the whole dev run (batch
size 64, other batch-mates); a rung whose scores move by more than `MAX_BATCH_DIFF` is refused with
that figure as its reason. ONNX Runtime's dynamic int8 (one activation scale per batch tensor) moved
the STS champion's scores by 0.030 between batch sizes 64 and 8; fp32 moves them by ~3e-8.

The verdict is stored beside the model's metadata (`simpair.models.precision_verdict`), written when a
version is registered or imported, or by `simpair models verdict`; a scoring run only reads it
(`simpair.runtime.resolve`), and scores a model without one at fp32. The int8
parity guard behind an explicit `--precision int8` (`int8_guard`) is the int8 rung of this same check.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from simpair.models.parity_limits import ParityLimits
from simpair.models.precision_verdict import (
    MIN_SPEEDUP,
    RUNGS,
    PrecisionVerdict,
    RungCheck,
    host_differences,
    int8_graph_note,
    sure_speedup,
)
from simpair.runtime import recheck
from simpair.runtime.model_ref import ModelRef
from simpair.stages import step

log = logging.getLogger(__name__)

DEFAULT_MAX_DELTA = 0.002
DEFAULT_MAX_FLIP_SHARE = 0.005
ENV_MAX_DELTA = "SIMPAIR_PRECISION_MAX_DELTA"
ENV_MAX_FLIP_SHARE = "SIMPAIR_PRECISION_MAX_FLIP_SHARE"
PRIMARY = {"paraphrase": "f1", "sts": "spearman"}
WARMUP_PAIRS = 16
# timing: a rung's speedup is fp32's time over the rung's on the same TIMING_PAIRS dev pairs, in
# TIMING_ROUNDS rounds that alternate which of the two runs first, after one untimed warm-up round of
# each; while the rounds' quartiles straddle MIN_SPEEDUP, up to MAX_TIMING_ROUNDS are run
TIMING_PAIRS = 128
TIMING_ROUNDS = 7
MAX_TIMING_ROUNDS = 21
MAX_BATCH_DIFF = 1e-4  # largest score change a rung may show between two batchings of the same pairs
INVARIANCE_PAIRS = 256  # dev pairs scored again alone, shuffled, at INVARIANCE_BATCH
INVARIANCE_BATCH = 8


class NoDevSplit(RuntimeError):
    """The model's dev split cannot be read, so no rung can be measured against fp32 (says why)."""


@dataclass(frozen=True)
class Limits(ParityLimits):
    """The ladder's limits: `SIMPAIR_PRECISION_MAX_DELTA` / `SIMPAIR_PRECISION_MAX_FLIP_SHARE`."""

    max_delta: float = DEFAULT_MAX_DELTA
    max_flip_share: float = DEFAULT_MAX_FLIP_SHARE
    env: ClassVar[tuple[str, str]] = (ENV_MAX_DELTA, ENV_MAX_FLIP_SHARE)


def dev_pairs(model_dir: Path, home: Path) -> tuple[str, Any]:
    """(where the dev pairs come from, frame) of the pairs the model was tuned on, from the pipeline home."""
    from simpair.catalog import Catalog, CatalogError
    from simpair.models.metadata import ModelMetadata

    metrics_file = model_dir / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.is_file() else {}
    meta = ModelMetadata.read(model_dir)
    ids_file = model_dir / (meta.dev_pair_ids_file or "dev_pair_ids.txt")
    source = metrics.get("dev_source")
    if (not source or not ids_file.is_file()) and meta.imported is not None:
        raise NoDevSplit("imported without a dev file")
    if not source or not ids_file.is_file():
        raise NoDevSplit(
            f"{model_dir.name} records no dev split (metrics.json dev_source and {ids_file.name}), "
            "so its precisions cannot be measured against fp32"
        )
    dataset, split = str(source).split()[0].split("/", 1)
    ids = ids_file.read_text().split()
    try:
        frame = Catalog(home).read_split(dataset, split)
    except (CatalogError, FileNotFoundError) as exc:
        raise NoDevSplit(
            f"its dev split {dataset}/{split} is not in the pipeline home {home} ({exc}), so its "
            "precisions cannot be measured against fp32"
        ) from None
    frame = frame.filter(frame["pair_id"].is_in(ids))
    if frame.is_empty():
        raise NoDevSplit(f"none of its {len(ids)} dev pairs are in {dataset}/{split} of {home}")
    return str(source), frame  # e.g. "stsb/dev", or "msrp/train carved 0.1 seed 13"


def dev_metric(predictor: Any, out: dict[str, np.ndarray], frame: Any) -> float:
    """The model's primary dev metric of `out`: F1 at its own threshold, or Spearman for graded pairs."""
    from simpair.metrics.binary_classification import binary_metrics
    from simpair.metrics.graded_similarity import graded_metrics

    if predictor.task == "paraphrase" and frame["label"].null_count() == 0:
        gold = frame["label"].to_numpy().astype(np.int64)
        return float(binary_metrics(out["probability"], gold, predictor.threshold)["f1"])
    return float(graded_metrics(out["score"], frame["score"].to_numpy().astype(np.float64))["spearman"])


@dataclass(frozen=True)
class Comparison:
    """A rung's outputs on the dev pairs against fp32's: the figures every verdict is judged on."""

    metric: str
    metric_fp32: float
    metric_rung: float
    label_flip_share: float | None
    max_score_change: float
    batch_max_diff: float | None = None  # across two batchings of the same pairs (`batch_invariance`)

    @property
    def delta(self) -> float:
        return self.metric_rung - self.metric_fp32


def compare(
    predictor: Any,
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    frame: Any,
    batch_max_diff: float | None = None,
) -> Comparison:
    """Label flips, dev metric of both, and the largest score change of `got` against fp32's `want`;
    `batch_max_diff` is the rung's own figure from `batch_invariance`, judged too when given."""
    flips = float(np.mean(want["label"] != got["label"])) if "label" in want else None
    return Comparison(
        metric=PRIMARY.get(predictor.task, "f1") if "label" in want else "spearman",
        metric_fp32=dev_metric(predictor, want, frame),
        metric_rung=dev_metric(predictor, got, frame),
        label_flip_share=flips,
        max_score_change=float(np.max(np.abs(np.asarray(got["score"]) - np.asarray(want["score"])))),
        batch_max_diff=batch_max_diff,
    )


def batch_invariance(
    predictor: Any, text_a: list[str], text_b: list[str], scores: np.ndarray, seed: int = 0
) -> float:
    """The largest score change of up to `INVARIANCE_PAIRS` dev pairs scored again on their own,
    shuffled, at batch size `INVARIANCE_BATCH`, against `scores` (the whole dev run's, batch size 64):
    other batch-mates, another batch size and another order at once."""
    n = len(text_a)
    pick = np.random.default_rng(seed).permutation(n)[: min(n, INVARIANCE_PAIRS)]
    again = predictor.predict(
        [text_a[i] for i in pick], [text_b[i] for i in pick], batch_size=INVARIANCE_BATCH
    )["score"]
    return float(np.max(np.abs(np.asarray(again) - np.asarray(scores)[pick]), initial=0.0))


def judge(precision: str, c: Comparison, limits: Limits) -> tuple[str, str]:
    """(verdict, reason) of a rung's comparison under `limits`: the reason names the figures."""
    problems = []
    if c.batch_max_diff is not None and c.batch_max_diff > MAX_BATCH_DIFF:
        problems.append(
            f"not batch-invariant: the same dev pairs move by {c.batch_max_diff:.2g} between batch sizes "
            f"64 and {INVARIANCE_BATCH} (shuffled), more than the allowed {MAX_BATCH_DIFF:g}"
        )
    if abs(c.delta) > limits.max_delta:
        problems.append(f"dev {c.metric} moves {c.delta:+.4f}, more than the allowed {limits.max_delta:g}")
    if c.label_flip_share is not None and c.label_flip_share > limits.max_flip_share:
        problems.append(
            f"{c.label_flip_share:.1%} of dev labels flip, more than the allowed {limits.max_flip_share:.1%}"
        )
    if problems:
        return "refused", "; ".join(problems)
    flips = "" if c.label_flip_share is None else f", {c.label_flip_share:.1%} of dev labels flip"
    return "accepted", f"dev {c.metric} moves {c.delta:+.4f}{flips}"


@dataclass(frozen=True)
class Timing:
    """A rung's speed against fp32's over interleaved rounds: the figures `RungCheck` records."""

    pairs_per_s: float  # the rung's median over the rounds
    speedup: float  # median of fp32's time / the rung's, round by round
    speedup_low: float  # lower quartile of the same ratios: what MIN_SPEEDUP judges
    rounds: int


def speed_ratio(
    fast: Any, fp32: Any, text_a: list[str], text_b: list[str], rounds: int = TIMING_ROUNDS
) -> Timing:
    """Time `fast` against `fp32` on the same dev pairs, interleaved, and take robust figures.

    One pass of each, timed apart, decided the verdict before: the same cross-encoder measured 1.5x
    fp32 on one registration and 1.00x on the next (2026-11-28), a compile, a cold cache or another
    process landing on one side. Here both first run an untimed round (OpenVINO and ONNX Runtime
    compile and allocate on their first batches), then each round times both on the same pairs, the
    order alternating so a drift in the machine's speed falls on both; the ratio is taken per round,
    so load that comes and goes between rounds cancels, and its median and lower quartile are kept.
    While the quartiles straddle MIN_SPEEDUP, more rounds are run (up to MAX_TIMING_ROUNDS) to narrow them.
    """
    n = min(len(text_a), TIMING_PAIRS)
    a, b = text_a[:n], text_b[:n]
    for predictor in (fp32, fast):
        predictor.predict(a, b)
    ratios: list[float] = []
    rates: list[float] = []

    def one_round(i: int) -> None:
        took = {}
        for name, predictor in (("fp32", fp32), ("fast", fast))[:: 1 if i % 2 == 0 else -1]:
            began = time.perf_counter()
            predictor.predict(a, b)
            took[name] = max(time.perf_counter() - began, 1e-9)
        ratios.append(took["fp32"] / took["fast"])
        rates.append(n / took["fast"])

    for i in range(rounds):
        one_round(i)
    while len(ratios) < MAX_TIMING_ROUNDS:
        low, high = np.quantile(ratios, [0.25, 0.75])
        if not low < MIN_SPEEDUP <= high:
            break
        for _ in range(2):  # keep the orders balanced
            one_round(len(ratios))
    return Timing(
        pairs_per_s=float(np.median(rates)),
        speedup=float(np.median(ratios)),
        speedup_low=float(np.quantile(ratios, 0.25)),
        rounds=len(ratios),
    )


def _timed(predictor: Any, text_a: list[str], text_b: list[str]) -> tuple[dict[str, np.ndarray], float]:
    """The predictor's outputs on the dev pairs and its pairs/s (after a short warm-up batch)."""
    predictor.predict(text_a[:WARMUP_PAIRS], text_b[:WARMUP_PAIRS])
    began = time.perf_counter()
    out = predictor.predict(text_a, text_b)
    return out, len(text_a) / max(time.perf_counter() - began, 1e-9)


def measure(
    model_dir: Path,
    home: Path,
    limits: Limits | None = None,
    threads: int | None = None,
    recheck_max_share: float = recheck.MAX_SHARE,
    dev: tuple[str, Any] | None = None,
) -> PrecisionVerdict:
    """Run every rung of the ladder on the model's dev pairs, each against fp32, and judge it.

    `dev` ((where from, frame with text_a, text_b, label, score)) replaces the recorded dev split: a
    model imported with a dev file of the user's own (`simpair.registry.imported`) has no split in
    the pipeline home.

    Loading a model for a rung sets torch's thread count for the process (a scoring process wants
    that); a night measures in the middle of its own work, so the count it had is put back after.
    Left at every core, the rest of a night on a shared machine ran its small forward passes with
    spinning threads: the smoke night's gate took 5x the CPU (2026-11-26).
    """
    import torch

    threads_before = torch.get_num_threads()
    try:
        return _measure(model_dir, home, limits, threads, recheck_max_share, dev)
    finally:
        torch.set_num_threads(threads_before)


def _measure(
    model_dir: Path,
    home: Path,
    limits: Limits | None,
    threads: int | None,
    recheck_max_share: float,
    dev: tuple[str, Any] | None = None,
) -> PrecisionVerdict:
    from simpair.models.device import host_facts, native_bf16, pick_device
    from simpair.runtime.loader import bf16_runtimes, default_threads, load_predictor

    limits = limits or Limits.from_env()
    threads = threads or default_threads()
    model_dir = Path(model_dir)
    split, frame = dev if dev is not None else dev_pairs(model_dir, home)
    text_a, text_b = frame["text_a"].to_list(), frame["text_b"].to_list()
    device = pick_device("auto")
    fp32 = load_predictor(
        str(model_dir), precision="fp32", backend="auto", threads=threads
    )  # what fp32 scoring runs (ORT on CPU)
    want, fp32_speed = _timed(fp32, text_a, text_b)
    metric = compare(fp32, want, want, frame)
    fp32_moves = batch_invariance(fp32, text_a, text_b, want["score"])
    exact_raw = None  # fp32's logits on dev, computed once if a rung is considered for a recheck
    rungs = [RungCheck("fp32", "accepted", _reference_reason(fp32_moves), metric.metric_fp32, 0.0,
                       0.0 if "label" in want else None, 0.0, round(fp32_speed, 1), 1.0,
                       batch_max_diff=fp32_moves)]  # fmt: skip
    for precision in RUNGS[1:]:
        if precision == "bf16" and not native_bf16(device):
            rungs.append(RungCheck("bf16", "skipped", f"no native bf16 on {device}"))
            continue
        checks = []
        for via in bf16_runtimes("auto", device) if precision == "bf16" else (None,):
            loaded = load_predictor(
                str(model_dir),
                precision=precision,
                backend="auto",
                threads=threads,
                bf16_via=via,
                recheck=False,
            )
            got = loaded.predict(text_a, text_b)
            moves = batch_invariance(loaded, text_a, text_b, got["score"])
            timing = speed_ratio(loaded, fp32, text_a, text_b)
            checks.append(_check(precision, via, fp32, want, got, frame, limits, timing, moves))
            if not checks[-1].accepted and recheck.supports(fp32):  # near the threshold in fp32?
                if exact_raw is None:
                    exact_raw = fp32.predict_raw(text_a, text_b)
                dev = (want, frame, exact_raw)
                checks += _rechecked(checks[-1], loaded, fp32, dev, limits, recheck_max_share)
        rungs.append(_best_runtime(checks))
    return PrecisionVerdict(
        metric=metric.metric, dev_split=split, pairs=len(text_a), device=str(device), threads=threads,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"), max_delta=limits.max_delta,
        max_flip_share=limits.max_flip_share, rungs=tuple(rungs), host=host_facts(device),
    )  # fmt: skip


def _rechecked(
    plain: RungCheck,
    loaded: Any,
    fp32: Any,
    dev: tuple[dict, Any, np.ndarray],
    limits: Limits,
    max_share: float,
) -> list[RungCheck]:
    """The refused runtime of `plain` again, with its pairs near the threshold scored in fp32 (`recheck`):
    its check, or nothing when the band would hold more than `max_share` of the dev pairs. `dev` is
    fp32's outputs, the dev frame and fp32's raw outputs on it. A runtime refused for moving with its
    batch-mates stays refused: a recheck only rescores pairs near the cut, the rest would still move.

    Judged out of sample: a band fitted on all of dev holds every dev pair the runtime flips, so its
    flips there would be 0 by construction. Instead each half of dev (alternate pairs) is decided with
    the band fitted on the other half, and those decisions are what the limits judge. The recorded
    band, and what runs use, is the one fitted on all of dev; the speed is measured with it.
    """
    if plain.batch_max_diff is not None and plain.batch_max_diff > MAX_BATCH_DIFF:
        return []
    want, frame, exact_raw = dev
    text_a, text_b = frame["text_a"].to_list(), frame["text_b"].to_list()
    fast_raw = np.asarray(loaded.predict_raw(text_a, text_b))
    cut = recheck.raw_cut(fp32)
    band = recheck.fit_band(exact_raw, fast_raw, cut)
    if band.share > max_share:
        return []
    got = loaded.from_raw(recheck.cross_fitted(exact_raw, fast_raw, cut))
    width = band.width  # unrounded: a close runtime's band can be far below 1e-4, and 0 would recheck nothing
    timing = speed_ratio(recheck.ThresholdRecheck(loaded, fp32, width), fp32, text_a, text_b)
    check = _check(
        plain.precision, plain.runtime, fp32, want, got, frame, limits, timing, plain.batch_max_diff
    )
    return [dataclasses.replace(check, recheck_band=width, recheck_share=round(band.share, 4))]


def _check(
    precision: str,
    via: str | None,
    fp32: Any,
    want: dict,
    got: dict,
    frame: Any,
    limits: Limits,
    timing: Timing,
    batch_max_diff: float | None = None,
) -> RungCheck:
    """One runtime's rung judged against fp32 on the dev pairs; `timing` is its speed against fp32's
    (`speed_ratio`), `batch_max_diff` its own scores' change between two batchings (`batch_invariance`)."""
    c = compare(fp32, want, got, frame, batch_max_diff)
    verdict, reason = judge(precision, c, limits)
    return RungCheck(
        precision, verdict, reason, c.metric_rung, c.delta, c.label_flip_share, c.max_score_change,
        round(timing.pairs_per_s, 1), round(timing.speedup, 2), via, batch_max_diff=batch_max_diff,
        speedup_low=round(timing.speedup_low, 2), timing_rounds=timing.rounds,
    )  # fmt: skip


def _reference_reason(moves: float) -> str:
    """fp32's reason: the reference, and a warning when even it moves with its batch-mates (nothing
    is below it to fall back on, so it is never refused; every other rung is then refused with it)."""
    if moves <= MAX_BATCH_DIFF:
        return "the reference"
    return f"the reference, though not batch-invariant here: its dev scores move by {moves:.2g}"


def _best_runtime(checks: list[RungCheck]) -> RungCheck:
    """One rung from its runtimes' checks: the fastest accepted one, else the first, with every reason.

    bf16 on OpenVINO is faster than torch autocast on CPUs with native bf16, but it keeps more of the
    graph in bf16: on the MSRP cross-encoder it flipped 1.0% of dev labels where torch flipped none
    (2026-11-27), so each runtime is judged on its own, and a refused one again with its pairs near the
    threshold scored in fp32 (`_rechecked`). Runtimes within timing noise of each other would swap
    between measurements, so a later one replaces the first accepted only where it clearly pays.
    """
    accepted = [c for c in checks if c.accepted]
    if accepted:  # the first (fastest-expected) runtime, unless another is surely MIN_SPEEDUP x faster
        best = accepted[0]
        for c in accepted[1:]:
            if sure_speedup(c) >= MIN_SPEEDUP * (best.speedup or 0.0):
                best = c
        return best
    if len(checks) == 1:
        return checks[0]
    reasons = "; ".join(f"{c.label()}: {c.reason}" for c in checks)
    return dataclasses.replace(checks[0], reason=reasons)


def measured_here(verdict: PrecisionVerdict | None) -> PrecisionVerdict | None:
    """`verdict` if it holds on this host (its recorded CPU flags and runtime versions are this host's,
    or it records none), else None: a copy registered or re-measured here measures again."""
    from simpair.models.device import host_facts, pick_device

    if verdict is None or host_differences(verdict.host, host_facts(pick_device("auto"))):
        return None
    if int8_graph_note(verdict.host) is not None:  # its int8 rung was judged on another int8 graph
        return None
    return verdict


def ensure_verdict(model_dir: Path, home: Path | None, threads: int | None = None) -> PrecisionVerdict:
    """The model's cached verdict if it holds on this host, else measured now on its dev split and
    cached (`NoDevSplit` if none)."""
    cached = measured_here(PrecisionVerdict.read(model_dir))
    if cached is not None:
        return cached
    if home is None:
        raise NoDevSplit(f"{Path(model_dir).name} has no cached precision verdict and no pipeline home")
    verdict = measure(Path(model_dir), home, threads=threads)
    path = verdict.write(model_dir)
    log.info("measured the precision ladder of %s on %s; cached in %s", model_dir, verdict.dev_split, path)
    return verdict


@step("measure-precision", run_name="precision-{model_dir.name}")
def measure_precision(home: Path, model_dir: Path) -> str | None:
    """The registration step of the night, in the flow and in process alike: the model's verdict cached.

    Runs before the version is created, so the registered artifact carries `precision_verdict.json` and
    `register_trained_model` records it as `simpair.precision.*` tags for the gate report. Returns the
    one line that says which rung `auto` takes and why, or None for a model with no dev split (it
    scores in fp32 and says so then).
    """
    try:
        verdict = ensure_verdict(Path(model_dir), Path(home))
    except NoDevSplit as exc:
        log.warning("no precision verdict for %s: %s; auto scores it in fp32", model_dir, exc)
        return None
    return verdict.why(verdict.choose())


def verdict_for(model: ModelRef, home: Path, force: bool = False) -> PrecisionVerdict:
    """`simpair models verdict`: the model's verdict, measured here when it has none, when the one it
    has was measured on another host (`measured_here`), or when `force`d.

    Stored beside the model (so scoring reads it) and, for a registry version, as its
    `simpair.precision.*` tags. Raises `NoDevSplit` when the model records no readable dev split.
    """
    model_dir = Path(model.local_dir)
    verdict = None if force else measured_here(PrecisionVerdict.read(model_dir))
    if verdict is None:
        verdict = measure(model_dir, home)
        verdict.write(model_dir)
        if not model.version.startswith("local-"):
            _tag_version(home, model, verdict)
    return verdict


def _tag_version(home: Path, model: ModelRef, verdict: PrecisionVerdict) -> None:
    from simpair.registry import registry

    registry.tag_version(registry.client(home), model.name, model.version, verdict.to_tags())
