"""`--precision auto`: the fp32 -> bf16 -> int8 ladder, measured once per model on its dev split
(at registration or by `simpair models verdict`), and only read by scoring.

Real tiny models, a toy dataset ingested into the test's home (its dev split is what the ladder
measures on), the embedded MLflow registry, real scoring runs and a real SIGKILL. Two tiny
cross-encoders differ only in their stored threshold: at 0.5 every dev probability lies on one side
(no rung flips a label), at the median fp32 dev probability int8's tiny error flips many labels, so
its int8 rung is really refused by the default limits, nothing faked.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_scoring_crash import _wait_chunks
from test_scoring_int8 import _ingest_toy, _tiny_with_dev
from test_scoring_support import assert_exactly_once, make_pairs, read_outputs, write_batch

from simpair.models import save_tiny_model
from simpair.models.precision_verdict import VERDICT_FILE, PrecisionVerdict
from simpair.registry import registry
from simpair.registry.record import register_trained_model
from simpair.runtime.loader import load_predictor
from simpair.runtime.model_ref import local_model_ref
from simpair.runtime.precision import DEFAULT_PRECISION, allowed_rungs
from simpair.runtime.resolve import resolve
from simpair.scoring import ScoringOptions, score_inbox
from simpair.selection import precision_ladder as ladder

NAME = "simpair-paraphrase"
SIMPAIR = str(Path(sys.executable).with_name("simpair"))


def _no_measuring(*args: object, **kwargs: object) -> None:
    raise AssertionError("the cached verdict must be read, not measured again")


def _knife_edge(path: Path, dev_ids: list[str], home: Path) -> Path:
    """A tiny cross-encoder whose threshold is the median fp32 dev probability (int8 flips labels)."""
    steady = _tiny_with_dev(path, dev_ids)
    frame = ladder.dev_pairs(steady, home)[1]
    texts = frame["text_a"].to_list(), frame["text_b"].to_list()
    scores = load_predictor(steady, device="cpu").predict(*texts)
    return _tiny_with_dev(path, dev_ids, threshold=float(np.median(scores["score"])))


def _no_dev_reads(*args: object, **kwargs: object) -> None:
    raise AssertionError("a scoring run must not read a dev split")


def test_auto_is_the_default_reads_the_stored_verdict_and_never_measures(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    from simpair.catalog import Catalog

    assert DEFAULT_PRECISION == "auto" and ScoringOptions().precision == "auto"
    dev_ids = _ingest_toy(home, tmp_path)
    model = _tiny_with_dev(tmp_path / "steady", dev_ids)
    inbox = tmp_path / "inbox"
    write_batch(make_pairs(80, seed=30), inbox / "night1.parquet")

    # no stored verdict: fp32, one line saying so and how to measure; set-up reads no dev split
    with monkeypatch.context() as m:
        m.setattr(Catalog, "read_split", _no_dev_reads)
        m.setattr(ladder, "measure", _no_measuring)
        first = score_inbox(str(inbox), tmp_path / "out0", str(model), home, threads=1)
    assert first.precision == "fp32" and first.precision_requested == "auto"
    assert first.precision_why == (
        f"auto: fp32 (no stored precision verdict; measure one with `simpair models verdict {model}`)"
    )
    assert not (model / VERDICT_FILE).exists()

    # measured once, by `simpair models verdict`, and stored beside the model
    verdict = ladder.verdict_for(local_model_ref(model), home)
    assert PrecisionVerdict.read(model) == verdict and (model / VERDICT_FILE).is_file()
    assert [r.precision for r in verdict.rungs] == ["fp32", "bf16", "int8"] and verdict.pairs == 120
    for rung in verdict.rungs:  # every rung measured against fp32, throughput included
        assert rung.verdict in ("accepted", "skipped") and (rung.verdict == "skipped" or rung.pairs_per_s)
        assert rung.label_flip_share in (0.0, None)  # threshold 0.5: no rung flips a dev label

    # scoring reads it: the chosen rung, nothing measured, no dev split read
    monkeypatch.setattr(Catalog, "read_split", _no_dev_reads)
    monkeypatch.setattr(ladder, "measure", _no_measuring)
    write_batch(make_pairs(40, seed=31, prefix="q"), inbox / "night2.parquet")
    again = score_inbox(str(inbox), tmp_path / "out", str(model), home, threads=1)
    chosen = verdict.choose(allowed_rungs("auto", load_predictor(model, device="cpu").device))
    assert again.precision == chosen.precision and again.precision_why.startswith(f"auto: {chosen.precision}")
    assert set(read_outputs(tmp_path / "out").column("precision").to_pylist()) == {chosen.precision}
    assert ladder.verdict_for(local_model_ref(model), home) == verdict  # stored: shown, not re-measured


def test_refused_int8_and_skipped_bf16_leave_fp32_with_scores_equal_to_fp32(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    import simpair.models.device as devices

    monkeypatch.setattr(devices, "native_bf16", lambda device: False)  # a CPU without AVX512-BF16
    dev_ids = _ingest_toy(home, tmp_path)
    edge = _knife_edge(tmp_path / "edge", dev_ids, home)

    import torch

    verdict = ladder.measure(edge, home, threads=2)
    assert torch.get_num_threads() == 1  # measured on 2 threads; the process keeps the count it had
    assert verdict.rung("bf16").verdict == "skipped" and "no native bf16" in verdict.rung("bf16").reason
    int8 = verdict.rung("int8")
    assert int8.verdict == "refused" and int8.label_flip_share > 0.005 and "of dev labels flip" in int8.reason
    assert int8.max_score_change > 0 and int8.speedup > 0
    verdict.write(edge)

    inbox = tmp_path / "inbox"
    write_batch(make_pairs(60, seed=32), inbox / "night1.parquet")
    summary = score_inbox(str(inbox), tmp_path / "out", str(edge), home, threads=1)
    assert summary.precision == "fp32"
    assert summary.precision_why.startswith("auto: fp32 (") and "int8 refused:" in summary.precision_why
    assert f"{int8.label_flip_share:.1%} of dev labels flip" in summary.precision_why
    output = read_outputs(tmp_path / "out")
    assert set(output.column("precision").to_pylist()) == {"fp32"}
    texts = output.column("text_a").to_pylist(), output.column("text_b").to_pylist()
    want = load_predictor(edge, device="cpu").predict(*texts)["score"]
    np.testing.assert_allclose(output.column("score").to_numpy(), want, atol=1e-5)


def test_no_dev_split_scores_fp32_and_the_verdict_command_says_why(
    home: Path, tmp_path: Path, one_thread: None
) -> None:
    bare = save_tiny_model(tmp_path / "bare", task="paraphrase", kind="cross")
    inbox = tmp_path / "inbox"
    write_batch(make_pairs(30, seed=33), inbox / "night1.parquet")
    summary = score_inbox(str(inbox), tmp_path / "out", str(bare), home, threads=1)
    assert (
        summary.precision == "fp32"
        and summary.precision_why == "auto: fp32 (no precision verdict: it records no dev split)"
    )
    with pytest.raises(ladder.NoDevSplit, match="records no dev split"):
        ladder.verdict_for(local_model_ref(bare), home)
    assert not (bare / VERDICT_FILE).exists()  # nothing measured, nothing cached (the home may change)


def test_registration_records_the_verdict_and_a_version_without_one_is_measured_once(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    from tasks.registry import measure_precision_task, register_model_task

    dev_ids = _ingest_toy(home, tmp_path)
    measured = _tiny_with_dev(tmp_path / "measured", dev_ids)
    why = measure_precision_task.fn(home, measured)  # the flow's step before register-model
    v1 = register_model_task.fn(home, measured, {"name": "m"}, {"dev_f1": 0.5}).version
    tags = registry.client(home).get_model_version(NAME, v1).tags
    verdict = PrecisionVerdict.read(measured)
    assert verdict is not None and tags["simpair.precision.chosen"] == verdict.choose().precision
    assert tags["simpair.precision.int8.verdict"] == "accepted"
    assert tags["simpair.precision.dev_split"] == "toy/dev"
    assert tags["simpair.precision.why"] == why and why.startswith("auto: ")
    assert "simpair.precision.int8.speedup" in tags

    # a version registered without a verdict scores at fp32 until `simpair models verdict` measures it
    plain = _tiny_with_dev(tmp_path / "plain", dev_ids)
    v2 = register_trained_model(home, plain, {"name": "p"}, {"dev_f1": 0.5}).version
    assert "simpair.precision.chosen" not in registry.client(home).get_model_version(NAME, v2).tags
    inbox = tmp_path / "inbox"
    write_batch(make_pairs(30, seed=34), inbox / "night1.parquet")
    summary = score_inbox(str(inbox), tmp_path / "out2", f"{NAME}/{v2}", home, threads=1)
    assert summary.precision == "fp32" and f"simpair models verdict {NAME}/{v2}" in summary.precision_why
    assert "simpair.precision.chosen" not in registry.client(home).get_model_version(NAME, v2).tags
    from simpair.runtime.model_ref import resolve_model_ref

    measured_later = ladder.verdict_for(resolve_model_ref(f"{NAME}/{v2}", home), home)
    tags = registry.client(home).get_model_version(NAME, v2).tags
    assert tags["simpair.precision.chosen"] == measured_later.choose().precision
    rescored = score_inbox(str(inbox), tmp_path / "out3", f"{NAME}/{v2}", home, threads=1)
    assert (
        rescored.precision_why.startswith(f"auto: {rescored.precision}")
        and "no stored" not in rescored.precision_why
    )

    # the registered artifact carries the verdict: scoring version 1 never measures
    monkeypatch.setattr(ladder, "measure", _no_measuring)
    first = score_inbox(str(inbox), tmp_path / "out1", f"{NAME}/{v1}", home, threads=1)
    allowed = allowed_rungs("auto", load_predictor(measured).device)
    assert first.precision_why == verdict.why(verdict.choose(allowed), allowed)


@pytest.mark.slow  # two `simpair score` processes: about 20 s on 2 idle cores
def test_sigkill_under_auto_resumes_in_the_same_precision_with_identical_scores(
    home: Path, tmp_path: Path
) -> None:
    dev_ids = _ingest_toy(home, tmp_path)
    model = _tiny_with_dev(tmp_path / "steady", dev_ids)
    ladder.verdict_for(local_model_ref(model), home)  # `simpair models verdict`: stored beside the model
    chosen = resolve("auto", "auto", load_predictor(model).device, local_model_ref(model), home)
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(1_500, seed=35)
    write_batch(table, inbox / "big.parquet", row_group_size=300)
    cmd = [SIMPAIR, "score", "--inbox", str(inbox), "--out", str(out), "--model", str(model), "--home",
           str(home), "--chunk-rows", "150", "--threads", "1", "--no-prefect"]  # fmt: skip

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_chunks(out, proc, 3)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    done = subprocess.run([*cmd, "--json", str(tmp_path / "s.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["precision"] == chosen[0] and summary["rows_scored_this_run"] < 1_500
    assert summary["precision_why"] == chosen[1]

    output = read_outputs(out)
    assert_exactly_once(table, output)
    assert set(output.column("precision").to_pylist()) == {chosen[0]}
    assert len(set(output.column("run_id").to_pylist())) == 2  # the killed run's chunks were kept
    # identical to an uninterrupted run: int8's activation ranges depend on the batch, so the same
    # chunks in the same precision is what makes a resumed file equal to one scored in one go
    reference = score_inbox(str(inbox), tmp_path / "ref", str(model), home, chunk_rows=150, threads=1)
    assert reference.precision == chosen[0]
    want = read_outputs(tmp_path / "ref").column("score").to_numpy()
    np.testing.assert_array_equal(output.column("score").to_numpy(), want)


def test_encode_runs_in_the_precision_the_cached_verdict_chose(
    home: Path, tmp_path: Path, one_thread: None
) -> None:
    import dataclasses

    import pyarrow as pa
    import pyarrow.parquet as pq

    from simpair.mining.encode import encode_file
    from simpair.models.metadata import ModelMetadata
    from simpair.runtime.options import RuntimeOptions

    dev_ids = _ingest_toy(home, tmp_path)
    bi = save_tiny_model(tmp_path / "bi", task="paraphrase", kind="bi", seed=1)
    meta = ModelMetadata.read(bi)
    meta.dev_pair_ids_file = "dev_pair_ids.txt"
    meta.write(bi)
    (bi / "dev_pair_ids.txt").write_text("\n".join(dev_ids) + "\n")
    (bi / "metrics.json").write_text(json.dumps({"dev": {"f1": 0.5}, "dev_source": "toy/dev"}) + "\n")
    verdict = ladder.measure(bi, home, threads=1)
    assert verdict.rung("int8").accepted  # threshold 0.5: int8 flips no dev label of this tiny model
    # pin the choice to int8 whatever this machine's timing noise says: under test is encode's reading
    rungs = tuple(
        dataclasses.replace(r, speedup=9.0, speedup_low=9.0) if r.precision == "int8" else r
        for r in verdict.rungs
    )
    dataclasses.replace(verdict, rungs=rungs).write(bi)

    sentences = make_pairs(40, seed=36).column("text_a").to_pylist()
    pq.write_table(pa.table({"text": sentences}), tmp_path / "sentences.parquet")
    runtime = RuntimeOptions(threads=1)
    source, target = tmp_path / "sentences.parquet", tmp_path / "vectors.parquet"
    encode_file(source, target, local_model_ref(bi), runtime=runtime)
    got = np.stack(pq.read_table(target).column("embedding").to_numpy(zero_copy_only=False))
    int8 = load_predictor(str(bi), precision="int8", backend="auto", threads=1).embed(sentences)
    fp32 = load_predictor(str(bi), precision="fp32", backend="auto", threads=1).embed(sentences)
    # int8 quantizes activations per batch, so a row batched with other texts may move by ~1e-4
    np.testing.assert_allclose(got, int8, atol=1e-3)
    assert np.mean(np.all(got == int8, axis=1)) > 0.8 and np.mean(np.all(got == fp32, axis=1)) < 0.2


def test_pyfunc_serves_the_fastest_torch_rung(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import simpair.models.device as devices
    from simpair.models.precision_verdict import RungCheck
    from simpair.runtime.pyfunc_model import served_precision

    assert served_precision(tmp_path) == "fp32"  # no verdict: fp32
    rungs = (
        RungCheck("fp32", "accepted", speedup=1.0),
        RungCheck("bf16", "accepted", speedup=1.4),
        RungCheck("int8", "accepted", speedup=2.9),  # ONNX Runtime: not in a served model's packages
    )
    PrecisionVerdict("f1", "toy/dev", 120, "cpu", 1, "2026-11-26T00:00:00+00:00", 0.002, 0.005, rungs).write(
        tmp_path
    )
    monkeypatch.setattr(devices, "native_bf16", lambda device: True)
    assert served_precision(tmp_path) == "bf16"
    monkeypatch.setattr(devices, "native_bf16", lambda device: False)
    assert served_precision(tmp_path) == "fp32"
    # bf16 accepted only with an fp32 recheck near the threshold: the pyfunc's plain bf16 was refused
    monkeypatch.setattr(devices, "native_bf16", lambda device: True)
    rechecked = (rungs[0], RungCheck("bf16", "accepted", speedup=1.4, recheck_band=0.5, recheck_share=0.04))
    verdict = PrecisionVerdict(
        "f1", "toy/dev", 120, "cpu", 1, "2026-11-27T00:00:00+00:00", 0.002, 0.005, rechecked
    )
    verdict.write(tmp_path)
    assert served_precision(tmp_path) == "fp32"
    # bf16 judged on OpenVINO: torch's autocast was not what the ladder measured
    on_openvino = (rungs[0], RungCheck("bf16", "accepted", speedup=1.8, runtime="openvino"))
    dataclasses.replace(verdict, rungs=on_openvino).write(tmp_path)
    assert served_precision(tmp_path) == "fp32"
    dataclasses.replace(
        verdict, rungs=(rungs[0], RungCheck("bf16", "accepted", speedup=1.3, runtime="torch"))
    ).write(tmp_path)
    assert served_precision(tmp_path) == "bf16"


def test_a_lossy_rung_must_buy_at_least_the_minimum_speedup() -> None:
    from simpair.models.precision_verdict import MIN_SPEEDUP, RungCheck

    def verdict(bf16_speedup: float) -> PrecisionVerdict:
        fp32, bf16 = (
            RungCheck("fp32", "accepted", speedup=1.0),
            RungCheck("bf16", "accepted", speedup=bf16_speedup),
        )
        return PrecisionVerdict(
            "f1", "toy/dev", 120, "cpu", 1, "2026-11-27T00:00Z", 0.002, 0.005, (fp32, bf16)
        )

    noisy = verdict(MIN_SPEEDUP - 0.05)  # e.g. 1.05x: within timing noise of fp32
    assert noisy.choose().precision == "fp32"
    assert "bf16 accepted but 1.05x fp32, under 1.1x" in noisy.why(noisy.choose())
    assert verdict(MIN_SPEEDUP).choose().precision == "bf16"
