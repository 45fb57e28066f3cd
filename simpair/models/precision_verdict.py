"""A model's precision verdict: which of fp32, bf16 and int8 keep its dev decisions, and how fast each runs.

Written once per model by the precision ladder (`simpair.selection.precision_ladder`, which measures it on
the model's recorded dev split) into `precision_verdict.json` beside `simpair.json`, and recorded as
`simpair.precision.*` tags on its registry version. Everything that runs the model with `--precision
auto` (scoring, encoding, mining, the MLflow pyfunc, a cascade's stages) reads this file and never
measures again, so a model scores in one precision on every run and a resumed run matches the one it
resumes. Kept here, beside the metadata, because registration and the pyfunc read it and must not
depend on the inference backends that measure it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from simpair.atomic import atomic_write_text
from simpair.models.int8_check import int8_graph

VERDICT_FILE = "precision_verdict.json"
INT8_GRAPH_FACT = "int8_graph"  # the host fact naming the int8 recipe the int8 rung was judged on
TAG_PREFIX = "simpair.precision."
RUNGS = ("fp32", "bf16", "int8")
# which forward passes can run which precision: ONNX Runtime has no fast bf16, int8 is an ORT graph
FIGURES = ("metric_delta", "label_flip_share", "max_score_change", "pairs_per_s", "speedup", "speedup_low",
           "timing_rounds", "recheck_band", "recheck_share", "batch_max_diff")  # fmt: skip
BACKEND_RUNGS = {"auto": RUNGS, "torch": ("fp32", "bf16"), "onnx": ("fp32", "int8")}
# a rung that changes scores must buy at least this much speed: a 1.0x "gain" is timing noise, and
# trading exact scores for it would make the chosen precision a coin toss between machines and runs.
# It is judged on the lower quartile of the rung's speedups over several interleaved rounds
# (`RungCheck.speedup_low`), so a rung has to clear it in most rounds, not in one lucky one.
MIN_SPEEDUP = 1.1


@dataclass(frozen=True)
class RungCheck:
    """One precision against fp32 on the dev pairs: `accepted`, `refused` (with why) or `skipped`."""

    precision: str
    verdict: str
    reason: str = ""
    metric: float | None = None  # the dev metric in this precision
    metric_delta: float | None = None  # against fp32
    label_flip_share: float | None = None  # None for graded (STS) models: no labels
    max_score_change: float | None = None  # largest |score - fp32 score| over the dev pairs
    pairs_per_s: float | None = None
    # the median of fp32's time over the rung's, over interleaved rounds on the same pairs after a
    # warm-up (`precision_ladder.speed_ratio`); verdicts before 2026-11-29 timed one pass of each
    speedup: float | None = None
    # bf16 only: "openvino" or "torch" (autocast); verdicts written before 2026-11-27 measured torch.
    # `--precision auto` and an explicit bf16 run the runtime that measured the rung.
    runtime: str | None = None
    # a cross-encoder's pairs within this many logits of its threshold are scored again in fp32
    # (`simpair.runtime.recheck`); `recheck_share` of the dev pairs were. None: no recheck.
    recheck_band: float | None = None
    recheck_share: float | None = None
    # largest change of a dev pair's score between two batchings (batch sizes 64 and 8, shuffled, a
    # chunk of dev against all of it); above 1e-4 the rung is refused. None: measured before 2026-12.
    batch_max_diff: float | None = None
    # the lower quartile of the timing rounds' speedups (what MIN_SPEEDUP judges), and how many rounds
    speedup_low: float | None = None
    timing_rounds: int | None = None

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    def label(self) -> str:
        """'openvino', 'openvino + fp32 recheck', 'int8 + fp32 recheck': which way the rung was run."""
        name = self.runtime or self.precision
        return f"{name} + fp32 recheck" if self.recheck_band is not None else name

    def figures(self) -> str:
        """'0.2% flips, metric -0.001, 2.9x fp32' (what the run summary shows of a chosen rung)."""
        parts = [] if self.label_flip_share is None else [f"{self.label_flip_share:.1%} flips"]
        if self.metric_delta is not None:
            parts.append(f"metric {self.metric_delta:+.3f}")
        if self.speedup is not None:
            parts.append(f"{self.speedup:.1f}x fp32")
        if self.runtime is not None:
            parts.append(f"via {self.runtime}")
        if self.recheck_band is not None:
            share = "" if self.recheck_share is None else f" ({self.recheck_share:.1%} of dev)"
            parts.append(f"fp32 recheck within {self.recheck_band:.2f} of the cut{share}")
        return ", ".join(parts)


def sure_speedup(rung: RungCheck) -> float:
    """The speedup a rung is judged on: its lower quartile over the timing rounds (the one figure of an
    older verdict, timed once)."""
    return rung.speedup_low if rung.speedup_low is not None else (rung.speedup or 0.0)


def worth_it(rung: RungCheck) -> bool:
    return sure_speedup(rung) >= MIN_SPEEDUP


def int8_graph_note(recorded: Mapping[str, str]) -> str | None:
    """'int8 judged on another int8 graph (MatMulInteger, before 2026-11-29; here ...)' when a verdict's
    int8 rung was measured on another recipe than this release builds; None when it was not.

    A verdict that records no host at all was written before 2026-11-29, so its int8 rung was measured
    on an older graph too: its fp32 and bf16 rungs hold everywhere, as before, its int8 rung does not.
    """
    before = recorded.get(INT8_GRAPH_FACT) or "per-row, MatMulInteger (before 2026-11-29)"
    here = int8_graph()
    if before == here:
        return None
    return f"int8 judged on another int8 graph ({before}; here {here})"


def host_differences(recorded: Mapping[str, str], here: Mapping[str, str]) -> list[str]:
    """'onnxruntime 1.31.0 here 1.32.0' for each host fact a verdict recorded that differs here.

    A verdict with no recorded facts (written before 2026-11-29) matches every host: homes that
    already hold verdicts keep scoring as they did. The int8 recipe is not a host fact: it judges the
    int8 rung alone (`int8_graph_note`). A fact recorded on one side only differs too: a verdict
    measured on a GPU (`gpu`) does not hold for the same machine's CPU, nor the other way round.
    """
    if not recorded:
        return []
    keys = [*recorded, *(k for k in here if k not in recorded)]
    keys = [k for k in keys if k != INT8_GRAPH_FACT]
    return [
        f"{key.replace('_', ' ')} {recorded.get(key) or 'none'} here {here.get(key) or 'none'}"
        for key in keys
        if (recorded.get(key) or "none") != (here.get(key) or "none")
    ]


@dataclass(frozen=True)
class PrecisionVerdict:
    """Every rung of the ladder for one model, measured once on `pairs` dev pairs of `dev_split`."""

    metric: str
    dev_split: str
    pairs: int
    device: str
    threads: int
    measured_at: str
    max_delta: float
    max_flip_share: float
    rungs: tuple[RungCheck, ...] = field(default_factory=tuple)
    # the host facts it holds for (`simpair.models.device.host_facts`: CPU flags, runtime versions);
    # empty in verdicts written before 2026-11-29, which are taken to hold everywhere
    host: dict[str, str] = field(default_factory=dict)

    def rung(self, precision: str) -> RungCheck | None:
        return next((r for r in self.rungs if r.precision == precision), None)

    def choose(self, allowed: Collection[str] = RUNGS) -> RungCheck:
        """Walk down the ladder (fp32, bf16, int8): each accepted rung among `allowed` replaces the one
        chosen so far only where it is surely `MIN_SPEEDUP` x faster than it (`sure_speedup` against
        the chosen one's median), else fp32.

        Two lossy rungs within timing noise of each other (int8 1.45x, bf16 1.5x) would otherwise
        swap on every measurement; the walk keeps the more exact one unless the other clearly pays.
        """
        chosen = self.rung("fp32") or RungCheck("fp32", "accepted", speedup=1.0)
        stale_int8 = int8_graph_note(self.host) is not None
        for precision in RUNGS[1:]:
            r = self.rung(precision)
            if r is None or not r.accepted or precision not in allowed:
                continue
            if precision == "int8" and stale_int8:
                continue
            if sure_speedup(r) >= MIN_SPEEDUP * (chosen.speedup or 1.0):
                chosen = r
        return chosen

    def why(self, chosen: RungCheck, allowed: Collection[str] = RUNGS) -> str:
        """One line for the run summary: 'auto: int8 (0.2% flips, metric -0.001, 2.9x fp32)'."""
        if chosen.precision != "fp32":
            return f"auto: {chosen.precision} ({chosen.figures()})"
        others = []
        for r in self.rungs:
            if r.precision == "fp32":
                continue
            if r.precision not in allowed:
                others.append(f"{r.precision} not run by this backend or device")
            elif r.precision == "int8" and r.accepted and int8_graph_note(self.host):
                others.append(f"{int8_graph_note(self.host)}: measure again with `simpair models verdict`")
            elif r.accepted:
                low = "" if r.speedup_low is None else f" (lower quartile {r.speedup_low:.2f}x)"
                others.append(
                    f"{r.precision} accepted but {r.speedup or 0:.2f}x fp32{low}, under {MIN_SPEEDUP}x"
                )
            else:
                others.append(f"{r.precision} {r.verdict}: {r.reason}")
        return "auto: fp32" + (f" ({'; '.join(others)})" if others else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrecisionVerdict:
        values = {k: v for k, v in data.items() if k in {f.name for f in fields(cls)}}
        values["host"] = {str(k): str(v) for k, v in (values.get("host") or {}).items()}
        known = {f.name for f in fields(RungCheck)}  # a newer writer's extra figures are skipped
        values["rungs"] = tuple(
            RungCheck(**{k: v for k, v in r.items() if k in known}) for r in values.get("rungs", ())
        )
        return cls(**values)

    def write(self, model_dir: str | Path) -> Path:
        """Cache the verdict next to the model's metadata (atomically: readers see all of it or none)."""
        return atomic_write_text(Path(model_dir) / VERDICT_FILE, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def read(cls, model_dir: str | Path) -> PrecisionVerdict | None:
        """The cached verdict of a model directory, or None when it has none (or it cannot be read)."""
        path = Path(model_dir) / VERDICT_FILE
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def to_tags(self) -> dict[str, str]:
        """`simpair.precision.*` version tags: the chosen rung, and each rung's verdict and figures."""
        chosen = self.choose()
        tags = {
            "chosen": chosen.precision,
            "why": self.why(chosen),
            "dev_split": self.dev_split,
            "pairs": str(self.pairs),
            "device": self.device,
            "measured_at": self.measured_at,
            "max_delta": f"{self.max_delta:g}",
            "max_flip_share": f"{self.max_flip_share:g}",
        }
        for r in self.rungs:
            tags[f"{r.precision}.verdict"] = r.verdict
            tags[f"{r.precision}.reason"] = r.reason
            for key in FIGURES:
                value = getattr(r, key)
                if value is not None:
                    tags[f"{r.precision}.{key}"] = f"{value:.6g}"
            if r.runtime is not None:
                tags[f"{r.precision}.runtime"] = r.runtime
        for key, value in self.host.items():
            tags[f"host.{key}"] = value
        return {TAG_PREFIX + key: value[:5000] for key, value in tags.items()}


def report_line(tags: Mapping[str, str], model_dir: str | Path | None = None) -> str:
    """One line for the gate report: the rung `--precision auto` takes and why, from the version's
    `simpair.precision.*` tags, else the verdict cached in `model_dir`, else why there is none."""
    why, pairs, split = (tags.get(TAG_PREFIX + key) for key in ("why", "pairs", "dev_split"))
    if not why and model_dir is not None and (verdict := PrecisionVerdict.read(model_dir)) is not None:
        why, pairs, split = verdict.why(verdict.choose()), str(verdict.pairs), verdict.dev_split
    if not why:
        return "fp32, no precision verdict (the model records no dev split to measure bf16 and int8 on)"
    return f"{why.removeprefix('auto: ')}; measured on {pairs} pairs of {split}"
