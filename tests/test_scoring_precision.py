"""Opt-in bf16 bulk scoring (`--precision bf16`): close to fp32, recorded everywhere, never mixed.

Real saved tiny BERT models, real ledgers and Parquet outputs, the real CLI in a subprocess. The only
stand-in is `native_bf16` forced to False in the fallback tests, to reach the branch a machine
without AVX512-BF16/AMX/CUDA takes; what is tested there is the scorer's reaction to it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import test_scoring_support as support
from test_scoring_support import assert_exactly_once, make_pairs, read_outputs, write_batch

from simpair.models import device as devices
from simpair.runtime import openvino_backend
from simpair.runtime.bf16_backend import Bf16Predictor
from simpair.runtime.loader import load_predictor
from simpair.runtime.openvino_backend import OvPredictor
from simpair.scoring import score_inbox
from simpair.scoring.ledger import Ledger
from simpair.scoring.summary import summary_markdown

tiny_cross = support.tiny_cross
tiny_bi = support.tiny_bi

NATIVE = devices.native_bf16(devices.pick_device("auto"))
BF16_RUNS_AS = "bf16" if NATIVE else "fp32"  # what a bf16 request scores in on this machine
SIMPAIR = str(Path(sys.executable).with_name("simpair"))
CLOSE = 5e-2  # tiny random BERT: bf16 moves its scores by ~1e-5..1e-4; a broken path moves them by more


def _texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    table = make_pairs(n, seed=seed)
    return table.column("text_a").to_pylist(), table.column("text_b").to_pylist()


@pytest.fixture(scope="module")
def tiny_stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return support.write_tiny_stack(tmp_path_factory.mktemp("stack") / "tiny-stack")


def _torch_members(predictor: object) -> list[object]:
    return list(getattr(predictor, "members", [predictor]))


# Without native bf16 a bf16 request runs fp32 (its own test: `test_without_native_bf16_...`), and
# fp32 compared with fp32 would pass whatever bf16 does.
@pytest.mark.skipif(
    not NATIVE, reason="no native bf16 on this machine: bf16 vs fp32 would compare fp32 with fp32"
)
@pytest.mark.parametrize("which", ["tiny_cross", "tiny_bi", "tiny_stack"])
def test_bf16_scores_stay_close_to_fp32_on_openvino_or_torch(
    which: str, request: pytest.FixtureRequest
) -> None:
    """`auto` + bf16 scores with OpenVINO where it is installed, else torch autocast (ORT has no fast
    bf16 on CPU); `--backend torch` + bf16 is always torch. Members of a stack too."""
    model = request.getfixturevalue(which)
    a, b = _texts(400, seed=11)
    fp32 = load_predictor(str(model), precision="fp32", backend="torch", threads=1).predict(a, b)
    bf16_predictor = load_predictor(str(model), precision="bf16", backend="auto", threads=1)
    wanted = OvPredictor if openvino_backend.available() else Bf16Predictor
    assert all(isinstance(m, wanted) for m in _torch_members(bf16_predictor))
    torch_bf16 = load_predictor(str(model), precision="bf16", backend="torch", threads=1)
    assert all(isinstance(m, Bf16Predictor) for m in _torch_members(torch_bf16))
    assert np.abs(torch_bf16.predict(a, b)["score"] - fp32["score"]).max() < CLOSE
    bf16 = bf16_predictor.predict(a, b)
    assert set(bf16) == set(fp32)
    assert bf16["score"].dtype == np.float32
    assert np.all((bf16["score"] >= 0) & (bf16["score"] <= 1))
    assert np.abs(bf16["score"] - fp32["score"]).max() < CLOSE


@pytest.mark.parametrize("which", ["tiny_cross", "tiny_bi", "tiny_stack"])
def test_openvino_runs_the_verified_graph_exactly_in_f32(which: str, request: pytest.FixtureRequest) -> None:
    """The OpenVINO path on any CPU: in f32 it must give torch's scores (so bf16 differs by bf16 only)."""
    model = request.getfixturevalue(which)
    a, b = _texts(300, seed=12)
    fp32 = load_predictor(str(model), precision="fp32", backend="torch", threads=1)
    ov = openvino_backend.use_openvino(load_predictor(model, device="cpu"), 1, precision="f32")
    assert all(isinstance(m, OvPredictor) for m in _torch_members(ov))
    assert all("openvino-f32" in m.variant for m in _torch_members(ov))
    np.testing.assert_allclose(ov.predict(a, b)["score"], fp32.predict(a, b)["score"], atol=1e-5)


def test_bf16_runs_on_the_runtime_that_judged_it(tiny_cross: Path, tmp_path: Path) -> None:
    """A verdict whose bf16 rung torch measured (or one written before the runtime was recorded) keeps
    torch; one OpenVINO measured keeps OpenVINO; `--backend torch` and CUDA always mean torch."""
    import shutil

    import torch

    from simpair.models.precision_verdict import PrecisionVerdict, RungCheck
    from simpair.runtime.loader import bf16_runtime

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    default = "openvino" if openvino_backend.available() else "torch"
    model = tmp_path / "m"
    shutil.copytree(tiny_cross, model)
    assert bf16_runtime(str(model), "auto", cpu) == default  # no verdict yet: what the ladder measures with
    assert bf16_runtime(str(model), "torch", cpu) == "torch"
    assert bf16_runtime(str(model), "auto", cuda) == "torch"
    for runtime, expected in ((None, "torch"), ("torch", "torch"), ("openvino", default)):
        rungs = (
            RungCheck("fp32", "accepted", speedup=1.0),
            RungCheck("bf16", "accepted", speedup=1.3, runtime=runtime),
        )
        verdict = PrecisionVerdict("f1", "toy/dev", 10, "cpu", 1, "now", 0.002, 0.005, rungs)
        verdict.write(model)
        assert bf16_runtime(str(model), "auto", cpu) == expected
        if runtime is not None:
            assert verdict.to_tags()["simpair.precision.bf16.runtime"] == runtime
            assert verdict.why(verdict.choose()).endswith(f"1.3x fp32, via {runtime})")


@pytest.mark.skipif(not NATIVE, reason="no native bf16 on this machine: a bf16 request runs fp32 here")
@pytest.mark.parametrize("which", ["tiny_cross", "tiny_bi", "tiny_stack"])
def test_native_bf16_really_changes_the_arithmetic(which: str, request: pytest.FixtureRequest) -> None:
    """Guards against a bf16 flag that silently runs fp32 (autocast not entered, members skipped)."""
    model = request.getfixturevalue(which)
    a, b = _texts(400, seed=11)
    fp32 = load_predictor(str(model), precision="fp32", backend="torch", threads=1)
    bf16 = load_predictor(str(model), precision="bf16", backend="torch", threads=1)
    for fp32_member, bf16_member in zip(_torch_members(fp32), _torch_members(bf16), strict=True):
        assert not np.array_equal(bf16_member.predict_raw(a, b), fp32_member.predict_raw(a, b))


@pytest.mark.skipif(not NATIVE, reason="Bf16Predictor refuses to run without native bf16")
@pytest.mark.parametrize("which", ["tiny_cross", "tiny_bi"])
def test_bf16_backend_is_exactly_the_predictors_bf16_autocast(
    which: str, request: pytest.FixtureRequest
) -> None:
    """Weights cast to bf16 once and one autocast context per call are speed only: with the same
    batches (no token budget) the scores are bit-identical to `Predictor(precision="bf16")`."""
    model = request.getfixturevalue(which)
    a, b = _texts(300, seed=20)
    reference = load_predictor(model, precision="bf16").predict_raw(a, b, batch_size=32)
    fast = Bf16Predictor(load_predictor(model, precision="bf16"), max_batch_tokens=None)
    np.testing.assert_array_equal(fast.predict_raw(a, b, batch_size=32), reference)


def test_without_native_bf16_it_warns_and_scores_exactly_fp32(
    tmp_path: Path, tiny_cross: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(devices, "native_bf16", lambda device: False)
    table = make_pairs(600, seed=12)
    write_batch(table, tmp_path / "inbox" / "night.parquet")
    fp32 = score_inbox(
        str(tmp_path / "inbox"), tmp_path / "out-fp32", str(tiny_cross), tmp_path / "home",
        threads=1, backend="torch", precision="fp32", chunk_rows=256,
    )  # fmt: skip
    with pytest.warns(RuntimeWarning, match="no native bf16.*scoring in fp32"):
        asked = score_inbox(
            str(tmp_path / "inbox"), tmp_path / "out-bf16", str(tiny_cross), tmp_path / "home",
            threads=1, backend="torch", precision="bf16", chunk_rows=256,
        )  # fmt: skip
    assert (asked.precision, asked.precision_requested) == ("fp32", "bf16")
    assert (fp32.precision, fp32.precision_requested) == ("fp32", "fp32")
    assert "fell back" in summary_markdown(asked)
    want, got = read_outputs(tmp_path / "out-fp32"), read_outputs(tmp_path / "out-bf16")
    np.testing.assert_array_equal(got.column("score").to_numpy(), want.column("score").to_numpy())
    assert set(got.column("precision").to_pylist()) == {"fp32"}

    # load_predictor with a backend, on its own (benchmarks, notebooks), falls back the same way
    with pytest.warns(RuntimeWarning, match="no native bf16"):
        predictor = load_predictor(str(tiny_cross), precision="bf16", backend="torch", threads=1)
    a, b = _texts(200, seed=13)
    reference = load_predictor(str(tiny_cross), precision="fp32", backend="torch", threads=1).predict(a, b)[
        "score"
    ]
    np.testing.assert_array_equal(predictor.predict(a, b)["score"], reference)
    with (
        pytest.raises(RuntimeError, match="emulated bf16"),
        pytest.warns(UserWarning, match="no native bf16"),
    ):
        Bf16Predictor(load_predictor(tiny_cross, precision="fp32"))  # the backend itself refuses too


def test_onnx_with_bf16_is_refused_before_anything_is_claimed(tmp_path: Path, tiny_cross: Path) -> None:
    write_batch(make_pairs(50, seed=14), tmp_path / "inbox" / "night.parquet")
    with pytest.raises(ValueError, match="ONNX Runtime.*--backend torch or auto"):
        score_inbox(str(tmp_path / "inbox"), tmp_path / "out", str(tiny_cross), threads=1, backend="onnx",
                    precision="bf16")  # fmt: skip
    assert not (tmp_path / "out").exists()  # no lock, no ledger, no claim
    with pytest.raises(ValueError, match="precision must be one of"):
        load_predictor(str(tiny_cross), precision="fp16", backend="torch", threads=1)
    with pytest.raises(ValueError, match="ONNX Runtime"):
        load_predictor(str(tiny_cross), precision="bf16", backend="onnx", threads=1)


def test_precision_is_recorded_on_rows_in_the_ledger_and_in_the_summary(
    tmp_path: Path, tiny_bi: Path
) -> None:
    table = make_pairs(700, seed=15)
    write_batch(table, tmp_path / "inbox" / "night.parquet")
    summary = score_inbox(
        str(tmp_path / "inbox"), tmp_path / "out", str(tiny_bi), tmp_path / "home",
        threads=1, precision="bf16", chunk_rows=300,
    )  # fmt: skip
    output = read_outputs(tmp_path / "out")
    assert_exactly_once(table, output)
    assert output.column_names.index("precision") == output.column_names.index("model_run_id") + 1
    assert set(output.column("precision").to_pylist()) == {BF16_RUNS_AS}
    assert summary.precision == BF16_RUNS_AS and summary.to_dict()["precision_requested"] == "bf16"
    assert f"Precision: **{BF16_RUNS_AS}**" in summary_markdown(summary)
    [record] = Ledger(tmp_path / "out").files()
    chunks = Ledger(tmp_path / "out").chunks(record.sha256)
    assert len(chunks) == 3 and {c.precision for c in chunks.values()} == {BF16_RUNS_AS}
    with sqlite3.connect(tmp_path / "out" / "_ledger" / "ledger.sqlite") as conn:
        [(stored,)] = conn.execute("SELECT summary_json FROM runs").fetchall()
    assert json.loads(stored)["precision"] == BF16_RUNS_AS

    # One predict call over all 700 rows vs three 300-row chunks: in bf16 the batches (and their
    # padding widths) differ, which moves scores in the last bf16 bits (~1e-6 here), unlike fp32.
    expected = load_predictor(str(tiny_bi), precision="bf16", backend="auto", threads=1).predict(
        table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    )
    np.testing.assert_allclose(output.column("score").to_numpy(), expected["score"], atol=1e-4)


def test_resuming_a_batch_in_another_precision_rescores_its_chunks(tmp_path: Path, tiny_cross: Path) -> None:
    """A crashed fp32 run resumed with --precision bf16 must not leave fp32 chunks in a bf16 file."""
    table = make_pairs(900, seed=16)
    write_batch(table, tmp_path / "inbox" / "night.parquet")

    class Crash(Exception):
        pass

    def crash_after_first(result: object) -> None:
        raise Crash

    with pytest.raises(Crash):
        score_inbox(str(tmp_path / "inbox"), tmp_path / "out", str(tiny_cross), threads=1, backend="torch",
                    chunk_rows=300, on_chunk_done=crash_after_first)  # fmt: skip
    scored: list[int] = []
    summary = score_inbox(
        str(tmp_path / "inbox"), tmp_path / "out", str(tiny_cross), threads=1, precision="bf16",
        chunk_rows=300, on_chunk_done=lambda r: scored.append(r.idx),
    )  # fmt: skip
    assert scored == ([0, 1, 2] if NATIVE else [1, 2])  # fp32 chunk 0 is redone only if bf16 really runs
    output = read_outputs(tmp_path / "out")
    assert_exactly_once(table, output)
    assert set(output.column("precision").to_pylist()) == {summary.precision} == {BF16_RUNS_AS}


def test_a_ledger_from_before_precision_is_upgraded_and_its_chunks_redone(
    tmp_path: Path, tiny_cross: Path
) -> None:
    """A batch half-scored by a version that did not track precision: its ledger has no precision
    column and its staged part no `precision` column, so that chunk must be scored again."""
    table = make_pairs(600, seed=19)
    write_batch(table, tmp_path / "inbox" / "night.parquet")
    out = tmp_path / "out"

    def crash(result: object) -> None:
        raise KeyboardInterrupt  # what a killed run leaves: chunk 0 recorded, nothing finalized

    with pytest.raises(KeyboardInterrupt):
        score_inbox(str(tmp_path / "inbox"), out, str(tiny_cross), threads=1, backend="torch",
                    chunk_rows=300, on_chunk_done=crash)  # fmt: skip
    [part] = (out / "_staging").glob("*/chunk-000000.parquet")
    pq.write_table(pq.read_table(part).drop_columns(["precision"]), part)  # the old output layout
    with sqlite3.connect(out / "_ledger" / "ledger.sqlite") as conn:  # the old ledger layout
        conn.execute("ALTER TABLE chunks DROP COLUMN precision")
    [record] = Ledger(out).chunks(part.parent.name).values()
    assert (record.idx, record.precision) == (0, None)

    scored: list[int] = []
    score_inbox(str(tmp_path / "inbox"), out, str(tiny_cross), threads=1, backend="torch", chunk_rows=300,
                on_chunk_done=lambda r: scored.append(r.idx))  # fmt: skip
    assert scored == [0, 1]
    output = read_outputs(out)
    assert_exactly_once(table, output)
    assert set(output.column("precision").to_pylist()) == {"fp32"}


def test_cli_precision_flag_end_to_end(tmp_path: Path, tiny_cross: Path) -> None:
    table = make_pairs(300, seed=17)
    write_batch(table, tmp_path / "inbox" / "night.parquet")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               COLUMNS="250")  # fmt: skip
    base = [SIMPAIR, "score", "--inbox", str(tmp_path / "inbox"), "--model", str(tiny_cross),
            "--home", str(tmp_path / "home"), "--no-prefect", "--threads", "1"]  # fmt: skip

    refuse = [*base, "--out", str(tmp_path / "x"), "--backend", "onnx", "--precision", "bf16"]
    refused = subprocess.run(refuse, capture_output=True, text=True, env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    message = " ".join(refused.stderr.replace("│", " ").split())  # rich draws the error in a box
    assert "ONNX Runtime's CPU provider has no fast bf16 path" in message, message
    assert not (tmp_path / "x").exists()

    summary_path = tmp_path / "summary.json"
    command = [*base, "--out", str(tmp_path / "out"), "--precision", "bf16", "--json", str(summary_path)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"in {BF16_RUNS_AS}" in done.stdout
    summary = json.loads(summary_path.read_text())
    assert (summary["precision"], summary["precision_requested"], summary["rows_scored"]) == (
        BF16_RUNS_AS,
        "bf16",
        300,
    )
    [output] = sorted((tmp_path / "out").glob("date=*/*.parquet"))
    assert set(pq.read_table(output, columns=["precision"]).column("precision").to_pylist()) == {BF16_RUNS_AS}


@pytest.mark.parametrize("budget", [1, 40, 512])
def test_token_budget_batches_cap_tokens_and_restore_input_order(budget: int) -> None:
    """The batching the bf16 path (and ONNX) runs on: every output back at its input's position,
    no batch over the budget unless a single pair is longer. The forward pass here reports each
    row's unpadded length, so a misplaced output shows as a wrong length."""
    from simpair.runtime.budget import run_budget_batches

    rng = np.random.default_rng(budget)
    ids = [list(range(1, int(n) + 1)) for n in rng.integers(1, 90, size=257)]
    widths: list[tuple[int, int]] = []

    def forward(batch: dict) -> np.ndarray:
        widths.append(tuple(batch["input_ids"].shape))
        return batch["attention_mask"].sum(dim=1).numpy().astype(np.float32)

    got = run_budget_batches({"input_ids": ids}, 64, budget, 0, forward)
    np.testing.assert_array_equal(got, [len(x) for x in ids])
    assert sum(rows for rows, _ in widths) == len(ids)
    assert all(rows <= 64 and (rows == 1 or rows * width <= budget) for rows, width in widths)


def test_the_ladder_judges_each_bf16_runtime_and_keeps_the_fastest_accepted() -> None:
    """OpenVINO's bf16 is faster but keeps more of the graph in bf16: it can flip labels torch does not."""
    from simpair.models.precision_verdict import RungCheck
    from simpair.selection.precision_ladder import _best_runtime

    ov_refused = RungCheck(
        "bf16", "refused", "1.0% of dev labels flip", speedup=1.9, pairs_per_s=250.0, runtime="openvino"
    )
    torch_ok = RungCheck("bf16", "accepted", "", speedup=1.3, pairs_per_s=150.0, runtime="torch")
    ov_ok = RungCheck("bf16", "accepted", "", speedup=1.9, pairs_per_s=250.0, runtime="openvino")
    torch_refused = RungCheck(
        "bf16", "refused", "0.6% of dev labels flip", speedup=1.3, pairs_per_s=150.0, runtime="torch"
    )
    assert _best_runtime([ov_refused, torch_ok]) == torch_ok
    assert _best_runtime([ov_ok, torch_ok]) == ov_ok
    both = _best_runtime([ov_refused, torch_refused])
    assert not both.accepted and both.runtime == "openvino"
    assert both.reason == "openvino: 1.0% of dev labels flip; torch: 0.6% of dev labels flip"
    assert _best_runtime([torch_refused]) == torch_refused
