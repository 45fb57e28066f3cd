"""The precision verdict is stable: one model measured again and again gets the same rung, and a verdict
holds only on the host it was measured on.

The ladder times each rung against fp32 in interleaved rounds after a warm-up and judges the 1.1x rule
on the rounds' lower quartile (`precision_ladder.speed_ratio`), so a compile or a cold cache on one
side no longer decides it. A verdict records its host's CPU flags and runtime versions; where this
host's differ, `auto` scores at fp32 and an explicit int8 is refused, each saying so in one line.
Real tiny models, a toy dev split, the real ladder and resolver.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from test_scoring_int8 import _ingest_toy, _tiny_with_dev

from simpair.models.device import host_facts
from simpair.models.int8_check import Int8Refused
from simpair.models.precision_verdict import PrecisionVerdict, RungCheck
from simpair.runtime.model_ref import local_model_ref
from simpair.runtime.resolve import resolve
from simpair.selection import precision_ladder as ladder

CPU = torch.device("cpu")


def test_ten_measurements_of_one_model_give_one_verdict(home: Path, tmp_path: Path, one_thread: None) -> None:
    model = _tiny_with_dev(tmp_path / "m", _ingest_toy(home, tmp_path))
    verdicts = [ladder.measure(model, home, threads=1) for _ in range(10)]
    chosen = {(v.choose().precision, v.choose().label()) for v in verdicts}
    assert len(chosen) == 1, chosen
    for v in verdicts:
        assert v.host == host_facts(CPU)  # the host it holds for, recorded
        for rung in v.rungs:
            if rung.precision != "fp32" and rung.speedup is not None:  # timed in rounds, not once
                assert rung.timing_rounds is not None and rung.timing_rounds >= ladder.TIMING_ROUNDS
                assert rung.speedup_low is not None and rung.speedup_low <= rung.speedup


class _Sleeper:
    """A stand-in forward pass that takes `seconds` per call, and `first` on its first call (a compile)."""

    def __init__(self, seconds: float, first: float = 0.0) -> None:
        self.seconds, self.first, self.calls = seconds, first, 0

    def predict(self, text_a: list[str], text_b: list[str]) -> dict[str, np.ndarray]:
        self.calls += 1
        time.sleep(self.first if self.calls == 1 and self.first else self.seconds)
        return {"score": np.zeros(len(text_a))}


def test_speed_ratio_warms_up_and_times_interleaved_rounds() -> None:
    # fp32 compiles slowly on its first call: one pass timed apart would call the rung 25x fp32. Calls of
    # tens of milliseconds, so a loaded machine's few milliseconds of oversleep cannot move the quartile
    fp32, fast = _Sleeper(0.03, first=0.5), _Sleeper(0.02)
    timing = ladder.speed_ratio(fast, fp32, ["a"] * 10, ["b"] * 10)
    assert timing.rounds >= ladder.TIMING_ROUNDS and fast.calls == fp32.calls == timing.rounds + 1
    assert 1.2 < timing.speedup_low <= timing.speedup < 1.8  # ~1.5x, the compile left out


def _verdict(host: dict[str, str]) -> PrecisionVerdict:
    rungs = (
        RungCheck("fp32", "accepted", speedup=1.0),
        RungCheck("bf16", "accepted", speedup=1.5, runtime="torch", speedup_low=1.45, timing_rounds=7),
        RungCheck("int8", "accepted", speedup=2.5, speedup_low=2.4, timing_rounds=7, batch_max_diff=0.0),
    )
    return PrecisionVerdict("f1", "toy/dev", 120, "cpu", 1, "2026-11-29T00:00Z", 0.002, 0.005, rungs, host)


def test_a_verdict_from_another_host_scores_fp32_and_says_so(tmp_path: Path, one_thread: None) -> None:
    from simpair.models import save_tiny_model

    model_dir = save_tiny_model(tmp_path / "m", task="paraphrase", kind="cross", seed=0)
    model = local_model_ref(model_dir)
    here = host_facts(CPU)

    _verdict(here).write(model_dir)  # measured here: auto takes its rung
    assert resolve("auto", "auto", CPU, model)[0] == "int8"
    assert ladder.measured_here(PrecisionVerdict.read(model_dir)) is not None
    _verdict({}).write(model_dir)  # written before host facts: fp32 and bf16 hold, int8 (older graph) not
    precision, why = resolve("auto", "auto", CPU, model)
    assert precision != "int8" and "int8 judged on another int8 graph" in why
    assert "measured on another host" not in why

    elsewhere = {**here, "onnxruntime": "1.31.0"}
    _verdict(elsewhere).write(model_dir)
    precision, why = resolve("auto", "auto", CPU, model)
    assert precision == "fp32"
    assert why == (
        f"auto: fp32 (verdict measured on another host: onnxruntime 1.31.0 here {here['onnxruntime']}; "
        f"measure here with `simpair models verdict {model_dir}`)"
    )
    with pytest.raises(Int8Refused, match="verdict measured on another host: onnxruntime 1.31.0"):
        resolve("int8", "auto", CPU, model)
    # measured with a GPU, read on this CPU alone: its timings and flips were the GPU's
    _verdict({**here, "gpu": "NVIDIA H200"}).write(model_dir)
    precision, why = resolve("auto", "auto", CPU, model)
    assert precision == "fp32" and "gpu NVIDIA H200 here none" in why
    # the loader's own `auto` holds to the same rule
    from simpair.runtime.loader import load_predictor

    assert "int8" not in load_predictor(model_dir, precision="auto", backend="auto", threads=1).variant
    _verdict(here).write(model_dir)
    assert "int8" in load_predictor(model_dir, precision="auto", backend="auto", threads=1).variant
    _verdict(elsewhere).write(model_dir)
    assert ladder.measured_here(PrecisionVerdict.read(model_dir)) is None  # registration measures again
    tags = PrecisionVerdict.read(model_dir).to_tags()
    assert tags["simpair.precision.host.onnxruntime"] == "1.31.0"


def test_an_int8_rung_judged_on_another_int8_graph_is_not_used_but_the_others_hold(
    tmp_path: Path, one_thread: None
) -> None:
    from simpair.models import save_tiny_model

    model_dir = save_tiny_model(tmp_path / "m", task="paraphrase", kind="cross", seed=0)
    model = local_model_ref(model_dir)
    here = host_facts(CPU)
    older = {k: v for k, v in here.items() if k != "int8_graph"}  # measured on the MatMulInteger graph
    _verdict(older).write(model_dir)
    precision, why = resolve("auto", "auto", CPU, model)
    assert precision == "bf16" or (precision == "fp32" and "bf16" in why)  # the next rung, not fp32 by host
    assert "int8 judged on another int8 graph (per-row, MatMulInteger" in why
    assert "measured on another host" not in why
    with pytest.raises(Int8Refused, match="int8 judged on another int8 graph"):
        resolve("int8", "auto", CPU, model)
    assert ladder.measured_here(PrecisionVerdict.read(model_dir)) is None  # `models verdict` measures again
    _verdict(here).write(model_dir)
    assert resolve("auto", "auto", CPU, model)[0] == "int8"
    assert resolve("int8", "auto", CPU, model)[0] == "int8"


def test_a_lossy_rung_must_surely_pay_and_close_rungs_keep_the_more_exact_one() -> None:
    v = _verdict(host_facts(CPU))
    noisy = dataclasses.replace(  # a median over 1.1x whose lower quartile is not: fp32
        v, rungs=(v.rungs[0], RungCheck("bf16", "accepted", speedup=1.15, speedup_low=1.05))
    )
    assert noisy.choose().precision == "fp32"
    assert "bf16 accepted but 1.15x fp32 (lower quartile 1.05x), under 1.1x" in noisy.why(noisy.choose())
    close = dataclasses.replace(  # int8 within noise of bf16: bf16, whichever measured faster this time
        v, rungs=(*v.rungs[:2], RungCheck("int8", "accepted", speedup=1.55, speedup_low=1.5))
    )
    assert close.choose().precision == "bf16"
    assert v.choose().precision == "int8"  # 2.4x surely beats bf16's 1.5x by MIN_SPEEDUP
