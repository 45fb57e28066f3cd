"""Opt-in int8 scoring (`--precision int8`) and its parity guard, on real tiny models and a real registry.

Tiny random BERTs, a toy dataset ingested into the test's home (its dev split is what the guard
measures on), the embedded MLflow registry, the CLI through typer's runner. Two registered versions
of one tiny cross-encoder differ only in their stored threshold: at 0.5 every dev probability lies
on one side (int8 changes no label: accepted), at the median fp32 dev probability a tiny int8 error
flips many labels, so that version is really refused by the default limits, nothing faked.
"""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import numpy as np
import pytest
import test_scoring_support as support
import torch
from test_scoring_support import make_pairs, read_outputs, write_batch
from typer.testing import CliRunner

from simpair.cli import app
from simpair.contracts import load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.models import save_tiny_model
from simpair.models.device import host_facts
from simpair.models.metadata import ModelMetadata
from simpair.registry import registry
from simpair.registry.record import register_trained_model
from simpair.runtime.int8_backend import use_int8
from simpair.runtime.loader import load_predictor
from simpair.runtime.model_ref import local_model_ref
from simpair.runtime.precision import check_precision
from simpair.scoring import ScoringOptions, score_inbox
from simpair.selection import int8_guard as guard

NAME = "simpair-paraphrase"
tiny_cross = support.tiny_cross
tiny_bi = support.tiny_bi
# int8 against fp32 on the same pairs, scores in [0, 1]: tiny random models move by ~1e-4 at most
# (measured 3e-5..7e-5); a graph fed the wrong inputs or not normalised moves them by far more.
INT8_ATOL = 1e-3
DEV_PAIRS = 120
CONTRACT = """\
dataset: toy
contract_version: "1"
format: {delimiter: "\\t", quoting: none, header: true, field_counts: [4]}
files:
  - {split: train, role: train, pattern: "toy/train.tsv"}
  - {split: dev, role: dev, pattern: "toy/dev.tsv"}
columns: {pair_id: id, label: label, text_a: a, text_b: b}
label: {kind: binary, values: [0, 1]}
"""


def _texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    table = make_pairs(n, seed=seed)
    return table.column("text_a").to_pylist(), table.column("text_b").to_pylist()


def _ingest_toy(home: Path, tmp: Path) -> list[str]:
    """A `toy` dataset whose dev split holds DEV_PAIRS distinct labelled pairs; returns the dev ids."""
    rng = random.Random(7)
    for split, n, seed in (("train", 20, 1), ("dev", DEV_PAIRS, 2)):
        a, b = _texts(n * 2, seed)
        rows, seen = ["id\tlabel\ta\tb"], set()
        for x, y in zip(a, b, strict=True):
            if (x, y) not in seen and len(seen) < n:
                seen.add((x, y))
                rows.append(f"{split}{len(seen)}\t{rng.randint(0, 1)}\t{x}\t{y}")
        (tmp / "src" / "toy").mkdir(parents=True, exist_ok=True)
        (tmp / "src" / "toy" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    (tmp / "toy.yaml").write_text(textwrap.dedent(CONTRACT))
    report = ingest_dataset(load_contract(tmp / "toy.yaml"), tmp / "src", home)
    assert report.status != "failed"
    return [f"dev{i}" for i in range(1, DEV_PAIRS + 1)]


def _tiny_with_dev(path: Path, dev_ids: list[str], threshold: float | None = None) -> Path:
    """A tiny paraphrase cross-encoder that records `toy/dev` as its dev split (as training does)."""
    save_tiny_model(path, task="paraphrase", kind="cross", seed=0)
    meta = ModelMetadata.read(path)
    meta.dev_pair_ids_file = "dev_pair_ids.txt"
    meta.threshold = meta.threshold if threshold is None else threshold
    meta.write(path)
    (path / "dev_pair_ids.txt").write_text("\n".join(dev_ids) + "\n")
    (path / "metrics.json").write_text(json.dumps({"dev": {"f1": 0.5}, "dev_source": "toy/dev"}) + "\n")
    return path


@pytest.fixture
def tiny_stack(tmp_path: Path) -> Path:
    return support.write_tiny_stack(tmp_path / "tiny-stack")


@pytest.mark.parametrize("which", ["tiny_cross", "tiny_bi", "tiny_stack"])
def test_int8_scores_stay_close_to_fp32(which: str, request: pytest.FixtureRequest, one_thread: None) -> None:
    model_dir = request.getfixturevalue(which)
    a, b = _texts(150, seed=11)
    want = load_predictor(model_dir, device="cpu").predict(a, b)
    predictor = use_int8(load_predictor(model_dir, device="cpu"), threads=1)
    got = predictor.predict(a, b)
    np.testing.assert_allclose(got["score"], want["score"], atol=INT8_ATOL)
    for member in getattr(predictor, "members", [predictor]):  # every member really runs int8
        assert member.precision == "int8" and member.variant.endswith("+int8-per-row")


def test_default_precision_is_auto_and_int8_needs_onnx_runtime() -> None:
    assert ScoringOptions().precision == "auto"
    assert ScoringOptions(precision="int8").backend == "auto"
    with pytest.raises(ValueError, match="int8 runs a quantized ONNX Runtime graph"):
        check_precision("int8", "torch")


def test_guard_accepts_records_and_caches_then_refuses_a_version_whose_labels_flip(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    dev_ids = _ingest_toy(home, tmp_path)
    steady = _tiny_with_dev(tmp_path / "steady", dev_ids)
    frame = guard.dev_pairs(steady, home)[1]
    dev_scores = load_predictor(steady, device="cpu").predict(
        frame["text_a"].to_list(), frame["text_b"].to_list()
    )
    knife_edge = _tiny_with_dev(tmp_path / "edge", dev_ids, threshold=float(np.median(dev_scores["score"])))
    v1 = register_trained_model(home, steady, {"name": "steady"}, {"dev_f1": 0.5}).version
    v2 = register_trained_model(home, knife_edge, {"name": "edge"}, {"dev_f1": 0.5}).version

    # version 1: measured on first use, accepted, recorded on the version
    check = guard.check_version(home, NAME, v1)
    assert check.accepted and check.delta == 0.0 and check.label_flip_share == 0.0
    tags = registry.client(home).get_model_version(NAME, v1).tags
    assert tags["simpair.int8.verdict"] == "accepted" and tags["simpair.int8.dev_split"] == "toy/dev"
    assert float(tags["simpair.int8.delta"]) == 0.0 and tags["simpair.int8.pairs"] == str(DEV_PAIRS)
    recorded_keys = {
        "metric_fp32",
        "metric_int8",
        "label_flip_share",
        "reason",
        "max_delta",
        "max_flip_share",
    }
    assert {f"simpair.int8.{key}" for key in recorded_keys} <= set(tags)

    def no_second_measurement(*args: object, **kwargs: object) -> None:
        raise AssertionError("the recorded check must be reused, not measured again")

    # version 2 has no stored check: scoring refuses at once and says how to measure; it measures nothing
    inbox = tmp_path / "inbox"
    write_batch(make_pairs(60, seed=30), inbox / "night1.parquet")
    runner = CliRunner()
    argv = ["score", "--inbox", str(inbox), "--home", str(home), "--precision", "int8", "--no-prefect"]
    with monkeypatch.context() as m:
        m.setattr(guard, "measure", no_second_measurement)
        unmeasured = runner.invoke(app, [*argv, "--out", str(tmp_path / "out2"), "--model", f"{NAME}/{v2}"])
    assert unmeasured.exit_code == 1 and "no stored int8 check" in unmeasured.output, unmeasured.output
    assert f"simpair models verdict {NAME}/{v2}" in unmeasured.output
    # `simpair models int8-check` measures it (refused) and records it; scoring then reads the refusal
    measured = runner.invoke(app, ["models", "int8-check", NAME, v2, "--home", str(home)])
    assert measured.exit_code == 1 and "int8 refused" in measured.output, measured.output
    refused = runner.invoke(app, [*argv, "--out", str(tmp_path / "out2"), "--model", f"{NAME}/{v2}"])
    assert refused.exit_code == 1 and refused.stdout == "", refused.output
    assert "Traceback" not in refused.output
    assert f"int8 refused for {NAME}/{v2}" in refused.output and "of dev labels" in refused.output
    assert "more than the allowed 1.00%" in refused.output
    assert not list((tmp_path / "out2").glob("date=*/*.parquet"))  # refused before any chunk
    recorded = guard.Int8Check.from_tags(registry.client(home).get_model_version(NAME, v2).tags)
    assert recorded is not None and recorded.verdict == "refused" and recorded.label_flip_share > 0.01
    assert "flips" in recorded.reason

    measure_for_real = guard.measure
    monkeypatch.setattr(guard, "measure", no_second_measurement)
    again = runner.invoke(app, [*argv, "--out", str(tmp_path / "out2"), "--model", f"{NAME}/{v2}"])
    assert again.exit_code == 1 and f"{recorded.label_flip_share:.2%}" in again.output

    # version 1 scores in int8 from its recorded verdict; every row says int8, scores close to fp32
    summary = score_inbox(str(inbox), tmp_path / "out1", f"{NAME}/{v1}", home, precision="int8")
    assert summary.precision == "int8" and summary.rows_scored == 60
    output = read_outputs(tmp_path / "out1")
    assert set(output.column("precision").to_pylist()) == {"int8"}
    texts = output.column("text_a").to_pylist(), output.column("text_b").to_pylist()
    want = load_predictor(steady, device="cpu").predict(*texts)["score"]
    np.testing.assert_allclose(output.column("score").to_numpy(), want, atol=INT8_ATOL)

    # explicit limits re-judge the recorded figures (no new measurement) and record the new verdict
    loose = runner.invoke(app, ["models", "int8-check", NAME, v2, "--max-flip-share", "1", "--max-delta", "1",
                                "--home", str(home)])  # fmt: skip
    assert loose.exit_code == 0 and "int8 accepted" in loose.output, loose.output
    assert registry.client(home).get_model_version(NAME, v2).tags["simpair.int8.verdict"] == "accepted"
    # an accepted check holds on the host it was measured on only (VNNI or not, the onnxruntime version)
    here = host_facts(torch.device("cpu"))
    assert (
        registry.client(home).get_model_version(NAME, v2).tags["simpair.int8.host.onnxruntime"]
        == (here["onnxruntime"])
    )
    registry.client(home).set_model_version_tag(NAME, v2, "simpair.int8.host.onnxruntime", "1.31.0")
    elsewhere = runner.invoke(app, [*argv, "--out", str(tmp_path / "out4"), "--model", f"{NAME}/{v2}"])
    assert elsewhere.exit_code == 1, elsewhere.output
    assert f"int8 check measured on another host: onnxruntime 1.31.0 here {here['onnxruntime']}" in (
        elsewhere.output
    )
    with monkeypatch.context() as m:  # `models int8-check` measures again here rather than reuse it
        m.setattr(guard, "measure", measure_for_real)
        remeasured = runner.invoke(app, ["models", "int8-check", NAME, v2, "--max-flip-share", "1",
                                         "--max-delta", "1", "--home", str(home)])  # fmt: skip
    assert remeasured.exit_code == 0 and "int8 accepted" in remeasured.output, remeasured.output
    tags = registry.client(home).get_model_version(NAME, v2).tags
    assert tags["simpair.int8.host.onnxruntime"] == here["onnxruntime"]
    check_argv = ["models", "int8-check", NAME, v2, "--home", str(home)]
    strict = runner.invoke(app, [*check_argv, "--max-delta", "0.005", "--max-flip-share", "0.01"])
    assert strict.exit_code == 1 and "int8 refused" in strict.output
    # a refusal recorded on an older int8 graph (perhaps under stricter limits) still refuses
    registry.client(home).set_model_version_tag(NAME, v2, "simpair.int8.mode", "per-row")
    stale = runner.invoke(app, [*argv, "--out", str(tmp_path / "out3"), "--model", f"{NAME}/{v2}"])
    assert stale.exit_code == 1 and "on another int8 graph" in stale.output, stale.output
    # an accepted one too (the other CPU's recipe, an older build): measured again, and it says so
    registry.client(home).set_model_version_tag(NAME, v2, "simpair.int8.verdict", "accepted")
    other = runner.invoke(app, [*argv, "--out", str(tmp_path / "out5"), "--model", f"{NAME}/{v2}"])
    assert other.exit_code == 1, other.output
    assert "int8 check measured on another int8 graph (per-row; here per-row, MatMulIntegerToFloat" in (
        other.output
    )
    assert f"simpair models int8-check {NAME} {v2}" in other.output


def test_plain_folder_scores_int8_only_with_a_stored_verdict_that_accepts_it(
    home: Path, tmp_path: Path, one_thread: None
) -> None:
    from simpair.runtime.resolve import int8_refusal
    from simpair.selection.precision_ladder import NoDevSplit, verdict_for

    dev_ids = _ingest_toy(home, tmp_path)
    folder = local_model_ref(_tiny_with_dev(tmp_path / "folder", dev_ids))
    assert int8_refusal(folder, home) == (
        f"no stored int8 check (measure one with `simpair models verdict {folder.local_dir}`)"
    )
    assert verdict_for(folder, home).rung("int8").accepted
    assert int8_refusal(folder, home) is None  # read from the verdict stored beside the model

    bare = local_model_ref(save_tiny_model(tmp_path / "bare", task="paraphrase", kind="cross"))
    with pytest.raises(NoDevSplit, match="records no dev split"):
        verdict_for(bare, home)
    other = local_model_ref(_tiny_with_dev(tmp_path / "other", dev_ids))
    with pytest.raises(NoDevSplit, match=r"toy/dev is not in the pipeline home"):
        verdict_for(other, tmp_path / "empty-home")
