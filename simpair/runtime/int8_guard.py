"""The int8 parity guard behind an explicit `--precision int8`: the int8 rung of the precision ladder.

`--precision auto` reads the whole ladder's cached verdict (`precision_ladder`, stricter limits); an
explicit int8 is checked here with the dev pairs, metric and comparison of that same ladder, under
its own limits below, and its verdict kept as `simpair.int8.*` tags on the registry version.

int8 moves scores far more than bf16, and how far depends on the weights (a fine-tuned model with
sharp logits flips labels an untrained one never does), so no tolerance can be promised in advance.
Instead each model is measured: its primary metric (paraphrase F1 at its own threshold, STS Spearman)
on the dev split it was tuned on, in fp32 and in int8, plus the share of dev labels int8 flips. int8
is refused when the metric moves by more than `max_delta` or more than `max_flip_share` of the labels
flip. The dev split is the one the model records (`metrics.json` `dev_source`, `dev_pair_ids.txt`),
read from the pipeline home, never the test split, which stays for evaluation.

A registry version's result is recorded on the version as `simpair.int8.*` tags, so one measurement
serves every later night and the verdict is visible in MLflow; a saved folder is measured on every
run that asks for int8 (it has no place to keep a verdict). A recorded verdict stands until the check
is run again (`simpair models int8-check`), which re-judges the recorded figures under the limits it
is given, or measures anew with `--force` (or when the quantization mode changed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from simpair.model_ref import ModelRef
from simpair.runtime.parity_limits import ParityLimits

TAG_PREFIX = "simpair.int8."
DEFAULT_MAX_DELTA = 0.005
DEFAULT_MAX_FLIP_SHARE = 0.01
ENV_MAX_DELTA = "SIMPAIR_INT8_MAX_DELTA"
ENV_MAX_FLIP_SHARE = "SIMPAIR_INT8_MAX_FLIP_SHARE"


class Int8Refused(RuntimeError):
    """int8 may not be used for this model: the message says why, in one line, for the operator."""


@dataclass(frozen=True)
class Int8Limits(ParityLimits):
    """`--precision int8`'s own limits: `SIMPAIR_INT8_MAX_DELTA` / `SIMPAIR_INT8_MAX_FLIP_SHARE`."""

    max_delta: float = DEFAULT_MAX_DELTA
    max_flip_share: float = DEFAULT_MAX_FLIP_SHARE
    env: ClassVar[tuple[str, str]] = (ENV_MAX_DELTA, ENV_MAX_FLIP_SHARE)


@dataclass(frozen=True)
class Int8Check:
    """One measurement of int8 against fp32 on a model's dev split, and the verdict under `limits`."""

    metric: str
    metric_fp32: float
    metric_int8: float
    label_flip_share: float | None  # None for graded (STS) models: they have no labels
    pairs: int
    dev_split: str
    mode: str
    measured_at: str
    max_delta: float
    max_flip_share: float
    verdict: str = ""
    reason: str = ""

    @property
    def delta(self) -> float:
        return self.metric_int8 - self.metric_fp32

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    def judged(self, limits: Int8Limits) -> Int8Check:
        """This measurement's verdict and reason under `limits` (nothing is measured again)."""
        figures = dict(asdict(self), max_delta=limits.max_delta, max_flip_share=limits.max_flip_share)
        problems = []
        moved = (
            f"int8 moves dev {self.metric} by {self.delta:+.4f} "
            f"(fp32 {self.metric_fp32:.4f}, int8 {self.metric_int8:.4f})"
        )
        if abs(self.delta) > limits.max_delta:
            problems.append(f"{moved}, more than the allowed {limits.max_delta:g}")
        flips = self.label_flip_share
        if flips is not None and flips > limits.max_flip_share:
            problems.append(
                f"int8 flips {flips:.2%} of dev labels at the model's threshold, more than the allowed "
                f"{limits.max_flip_share:.2%}"
            )
        if problems:
            return Int8Check(**figures | {"verdict": "refused", "reason": "; ".join(problems)})
        flip_text = (
            "" if flips is None else f", flips {flips:.2%} of dev labels (limit {limits.max_flip_share:.2%})"
        )
        reason = f"{moved} (limit {limits.max_delta:g}){flip_text}, on {self.pairs} pairs of {self.dev_split}"
        return Int8Check(**figures | {"verdict": "accepted", "reason": reason})

    def to_tags(self) -> dict[str, str]:
        """The `simpair.int8.*` version tags (MLflow tag values are strings)."""
        values: dict[str, Any] = asdict(self) | {"delta": f"{self.delta:.6g}"}
        values["label_flip_share"] = (
            "n/a" if self.label_flip_share is None else f"{self.label_flip_share:.6g}"
        )
        for key in ("metric_fp32", "metric_int8", "max_delta", "max_flip_share"):
            values[key] = f"{values[key]:.6g}"
        return {TAG_PREFIX + key: str(value) for key, value in values.items()}

    @classmethod
    def from_tags(cls, tags: dict[str, str]) -> Int8Check | None:
        """The check recorded on a version, or None when there is none (or it cannot be read)."""
        values = {k.removeprefix(TAG_PREFIX): v for k, v in tags.items() if k.startswith(TAG_PREFIX)}
        try:
            flips = values["label_flip_share"]
            return cls(
                metric=values["metric"], metric_fp32=float(values["metric_fp32"]),
                metric_int8=float(values["metric_int8"]),
                label_flip_share=None if flips == "n/a" else float(flips), pairs=int(values["pairs"]),
                dev_split=values["dev_split"], mode=values["mode"], measured_at=values["measured_at"],
                max_delta=float(values["max_delta"]), max_flip_share=float(values["max_flip_share"]),
                verdict=values["verdict"], reason=values["reason"],
            )  # fmt: skip
        except (KeyError, ValueError):
            return None


def dev_pairs(model_dir: Path, home: Path) -> tuple[str, Any]:
    """The precision ladder's dev pairs (`precision_ladder.dev_pairs`), refused as `Int8Refused`."""
    from simpair.runtime.precision_ladder import NoDevSplit
    from simpair.runtime.precision_ladder import dev_pairs as ladder_dev_pairs

    try:
        return ladder_dev_pairs(Path(model_dir), home)
    except NoDevSplit as exc:
        raise Int8Refused(str(exc).replace("its precisions", "its int8 metric")) from None


def measure(model_dir: Path, home: Path, limits: Int8Limits, threads: int = 1) -> Int8Check:
    """Score the model's dev pairs in fp32 and int8 and judge the difference under `limits`.

    The int8 rung of the precision ladder (`precision_ladder.compare`), with this guard's own limits.
    """
    from simpair.predictors import load_predictor
    from simpair.runtime.int8_backend import DEFAULT_MODE, use_int8
    from simpair.runtime.precision_ladder import compare

    model_dir = Path(model_dir)
    split, frame = dev_pairs(model_dir, home)
    text_a, text_b = frame["text_a"].to_list(), frame["text_b"].to_list()
    fp32 = load_predictor(model_dir, device="cpu", precision="fp32")
    int8 = use_int8(load_predictor(model_dir, device="cpu", precision="fp32"), threads)
    c = compare(fp32, fp32.predict(text_a, text_b), int8.predict(text_a, text_b), frame)
    return Int8Check(
        metric=c.metric, metric_fp32=c.metric_fp32, metric_int8=c.metric_rung,
        label_flip_share=c.label_flip_share, pairs=len(text_a), dev_split=split, mode=DEFAULT_MODE,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        max_delta=limits.max_delta, max_flip_share=limits.max_flip_share,
    ).judged(limits)  # fmt: skip


def check_version(
    home: Path,
    name: str,
    version: str,
    limits: Int8Limits | None = None,
    force: bool = False,
    threads: int = 1,
) -> Int8Check:
    """The int8 check of a registry version: the one recorded on it, else measured now and recorded.

    With `limits`, a recorded measurement is re-judged under them (and the new verdict recorded);
    without, a recorded verdict is returned as it stands. `force` measures again.
    """
    from simpair.registry import registry
    from simpair.runtime.int8_backend import DEFAULT_MODE

    c = registry.client(home)
    recorded = Int8Check.from_tags(dict(c.get_model_version(name, version).tags or {}))
    if recorded is not None and recorded.mode == DEFAULT_MODE and not force:
        if limits is None or (limits.max_delta, limits.max_flip_share) == (
            recorded.max_delta,
            recorded.max_flip_share,
        ):
            return recorded
        check = recorded.judged(limits)
    else:
        try:
            local_dir = registry.download_version(c, name, version, home)
            check = measure(local_dir, home, limits or Int8Limits.from_env(), threads)
        except Int8Refused as exc:  # nothing measured: say why, record nothing (the home may change)
            raise Int8Refused(f"int8 refused for {name}/{version}: {exc}") from None
    registry.tag_version(c, name, version, check.to_tags())
    return check


def require_int8(model: ModelRef | None, home: Path | None, threads: int = 1) -> Int8Check:
    """The accepted int8 check of the pinned model, or `Int8Refused` naming the figures and limits."""
    if model is None or home is None:
        raise ValueError("precision int8 needs the pinned model and the pipeline home (its parity check)")
    if model.version.startswith("local-"):  # a saved folder: no registry version to record on
        try:
            check = measure(Path(model.local_dir), home, Int8Limits.from_env(), threads)
        except Int8Refused as exc:
            raise Int8Refused(f"int8 refused for {model.label}: {exc}") from None
    else:
        check = check_version(home, model.name, model.version, threads=threads)
    if not check.accepted:
        recheck = f"simpair models int8-check {model.name} {model.version}"
        raise Int8Refused(
            f"int8 refused for {model.label}: {check.reason} (measured {check.measured_at} on "
            f"{check.pairs} pairs of {check.dev_split}); score with --precision fp32"
            + ("" if model.version.startswith("local-") else f", or re-check with `{recheck}`")
        )
    return check
