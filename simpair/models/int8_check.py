"""The record of an int8 parity check, as kept on a registry version (`simpair.int8.*` tags).

Measured by `simpair.selection.int8_guard` (`simpair models int8-check`); read, never measured, by a
scoring run that asks for `--precision int8` (`simpair.runtime.resolve`). A record here is figures
and a verdict under stated limits, so it can be re-judged under other limits without measuring again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from simpair.models.parity_limits import ParityLimits

# how the int8 graph is built (`simpair.runtime.int8_backend.quantize_per_row`). Another recipe's scores
# differ by up to ~1e-3, so a check (`Int8Check.mode`) or a verdict's int8 rung judged on another
# recipe is not trusted: int8 is measured again (`PrecisionVerdict.int8_graph_note`).
INT8_GRAPH = "per-row, MatMulIntegerToFloat"
# x86 CPUs without VNNI multiply uint8 by int8 in pairs summed into 16 bits, which saturate (VPMADDUBSW):
# there the weights keep 7 bits (+-63), so no pair can overflow (`int8_graph`)
INT8_GRAPH_7BIT = "per-row, MatMulIntegerToFloat, 7-bit weights"
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
X86_MACHINES = frozenset({"x86_64", "amd64", "x86", "i386", "i686"})
TAG_PREFIX = "simpair.int8."
DEFAULT_MAX_DELTA = 0.005
DEFAULT_MAX_FLIP_SHARE = 0.01
ENV_MAX_DELTA = "SIMPAIR_INT8_MAX_DELTA"
ENV_MAX_FLIP_SHARE = "SIMPAIR_INT8_MAX_FLIP_SHARE"


def int8_graph(flags: Collection[str] | None = None, machine: str | None = None) -> str:
    """The int8 recipe this host builds and judges: `INT8_GRAPH`, or `INT8_GRAPH_7BIT` on an x86 CPU
    without VNNI (or whose flags cannot be read).

    Without VNNI, ONNX Runtime's uint8 x int8 kernel adds two products into 16 bits before widening.
    With activations at zero point 128 and weights up to +-127 such a pair reaches 64,770 and is clipped
    at 32,767. Emulated on the paraphrase cross-encoder (256 MSRP pairs, 2026-11-30), clipping moved
    logits by 0.051 on average and up to 1.65, more than int8 itself moves them from fp32 (0.036, up
    to 0.84); 7-bit weights cannot overflow (255 x 63 x 2 = 32,130) and moved them by 0.043, up to 0.76.
    `flags` and `machine` default to this host's (`cpu_flag_set`, `platform.machine`).
    """
    import platform

    from simpair.models.cpu_flags import cpu_flag_set

    if (machine or platform.machine()).lower() not in X86_MACHINES:
        return INT8_GRAPH  # ARM's dot-product kernels widen before they add
    have = cpu_flag_set() if flags is None else set(flags)
    return INT8_GRAPH if have and VNNI_FLAGS & set(have) else INT8_GRAPH_7BIT


def weight_levels(graph: str) -> int:
    """The largest int8 weight magnitude of an int8 recipe: 63 for 7-bit weights, else 127."""
    return 63 if graph == INT8_GRAPH_7BIT else 127


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
    # the CPU host it was measured on (`device.host_facts`); empty for a check recorded before checks
    # recorded their host, which holds everywhere as before. int8 kernels differ with the CPU (VNNI or
    # not) and the onnxruntime version.
    host: dict[str, str] = field(default_factory=dict)

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
        host = values.pop("host")
        values["label_flip_share"] = (
            "n/a" if self.label_flip_share is None else f"{self.label_flip_share:.6g}"
        )
        for key in ("metric_fp32", "metric_int8", "max_delta", "max_flip_share"):
            values[key] = f"{values[key]:.6g}"
        return {TAG_PREFIX + key: str(value) for key, value in values.items()} | {
            f"{TAG_PREFIX}host.{key}": value[:5000]
            for key, value in host.items()  # MLflow's tag limit
        }

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
                host={k.removeprefix("host."): v for k, v in values.items() if k.startswith("host.")},
            )  # fmt: skip
        except (KeyError, ValueError):
            return None
