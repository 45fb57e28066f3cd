"""The precision verdict where people look: measured when the night registers a model, in process as in
the flow, recorded on the version, and shown as one line in the promotion gate's report.

A toy dataset ingested into the test's home (its dev split is what the ladder measures on), tiny
cross-encoders that record it as their dev split, the embedded MLflow registry, the real gate.
"""

from __future__ import annotations

from pathlib import Path

from test_scoring_int8 import _ingest_toy, _tiny_with_dev

from simpair.ingest.leakage import update_leakage
from simpair.models.precision_verdict import TAG_PREFIX, PrecisionVerdict, report_line
from simpair.nightly.night import register_all
from simpair.nightly.summary import Trained
from simpair.registry import registry
from simpair.selection.gate import GatePolicy
from simpair.selection.precision_ladder import measure_precision
from simpair.selection.promotion import run_gate
from simpair.stages import InProcess

NAME = "simpair-paraphrase"


def _trained(model_dir: Path) -> Trained:
    return Trained(
        task="paraphrase", model_dir=str(model_dir), config={"name": model_dir.name}, metrics={"dev_f1": 0.5},
        history=[], eval_metrics={}, eval_artifacts=[], seconds=1.0,
    )  # fmt: skip


def test_the_flow_runs_the_same_measuring_step_before_registering() -> None:
    from simpair.flows.nightly_retrain import NIGHT
    from simpair.tasks.registry import measure_precision_task
    from simpair.tasks.stages import stage_of

    # the task runs the domain step itself (test_precision_ladder), listed before register-model
    assert stage_of(measure_precision_task) is measure_precision
    names = [t.name for t in NIGHT]
    assert names.index("measure-precision") < names.index("register-model")


def test_the_in_process_night_records_the_verdict_and_the_gate_report_shows_it(
    home: Path, tmp_path: Path, one_thread: None
) -> None:
    dev_ids = _ingest_toy(home, tmp_path)
    update_leakage(home)  # the gate excludes leaked pairs: the report a full ingest writes
    measured = _tiny_with_dev(tmp_path / "measured", dev_ids)
    ran: list[str] = []
    runner = InProcess(after=lambda stage, value: ran.append(stage.__name__))

    (registered,) = register_all([_trained(measured)], home, runner)  # what `--no-prefect` runs

    assert ran == ["measure_precision", "register_trained_model"]  # measured before the version exists
    verdict = PrecisionVerdict.read(measured)
    assert verdict is not None and verdict.dev_split == "toy/dev"
    c = registry.client(home)
    tags = c.get_model_version(NAME, registered.version).tags
    assert tags == {**tags, **verdict.to_tags()}  # every simpair.precision.* tag, as the flow records them
    assert tags[TAG_PREFIX + "chosen"] == verdict.choose().precision
    assert tags[TAG_PREFIX + "int8.verdict"] == "accepted"

    # gated against itself as champion: one evaluation, the report is what is under test
    registry.move_champion(c, NAME, registered.version, reason="first", by="test", action="promote")
    decision = run_gate(home, "paraphrase", GatePolicy(primary="f1"), [("toy", "dev")], registered.version)

    chosen = verdict.choose()
    line = f"Precision (auto): {verdict.why(chosen).removeprefix('auto: ')}; measured on 120 pairs of toy/dev"
    report = decision.to_markdown(NAME)
    assert f"\n{line}\n" in report and line.startswith(f"Precision (auto): {chosen.precision} (")
    assert line in c.get_model_version(NAME, registered.version).description  # where the registry UI shows it


def test_a_model_without_a_verdict_says_so_in_one_line(tmp_path: Path) -> None:
    assert report_line({}, tmp_path) == (
        "fp32, no precision verdict (the model records no dev split to measure bf16 and int8 on)"
    )
    tags = {TAG_PREFIX + "why": "auto: bf16 (metric +0.000, 1.4x fp32)", TAG_PREFIX + "pairs": "408",
            TAG_PREFIX + "dev_split": "msrp/train carved 0.1 seed 13"}  # fmt: skip
    assert report_line(tags, tmp_path) == (
        "bf16 (metric +0.000, 1.4x fp32); measured on 408 pairs of msrp/train carved 0.1 seed 13"
    )
