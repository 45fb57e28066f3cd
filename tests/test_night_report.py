"""The night's report page (`simpair.nightly.report`): what a night did in one page, and scoring runs
joining it. Built from the night's own summary objects (a gate decision, an ingest report), from
`monitor.json` folders as the monitor writes them beside a scoring ledger, and from a real in-process
scoring run whose traffic alarms; the page a real smoke night writes is checked on that night in
tests/test_nightly.py, the alarm's way to a webhook in tests/test_stack_ops.py."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
import test_scoring_support as support
from test_scoring_support import make_pairs, write_batch

from simpair.ingest.report import DatasetReport, IngestReport, SplitReport
from simpair.monitoring.drift import DriftReport, DriftRow
from simpair.nightly import report as night_report
from simpair.nightly.plan import NightPlan
from simpair.nightly.report import NightReport, ScoredRun, add_scoring_run, publish_night_report
from simpair.nightly.summary import TaskOutcome, TrafficAccuracy, Trained, trained_summary
from simpair.selection.gate import CanaryResult, GateDecision

# a PNG's first bytes: the report copies plots, it does not read them
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def _monitor(out: Path, run_id: str, *, alarm: bool, version: str = "3") -> Path:
    """A monitor folder as the scoring monitor writes it (`DriftReport.to_json()`, and a plot)."""
    folder = out / "_monitor" / "simpair-paraphrase" / version / run_id
    folder.mkdir(parents=True)
    rows = [
        DriftRow(statistic="tokens", test="psi", value=2.31 if alarm else 0.02, threshold=0.25,
                 against="reference", alarm=alarm),
        DriftRow(statistic="score", test="ks", value=0.04, threshold=0.1, against="history", alarm=False),
    ]  # fmt: skip
    report = DriftReport(run_id=run_id, model="simpair-paraphrase", version=version, n_pairs=40, rows=rows)
    (folder / "monitor.json").write_text(report.to_json())
    (folder / "monitor_reference.png").write_bytes(PNG)
    return folder / "monitor.json"


def _summary(tmp_path: Path, run_id: str = "0c1f2a3b-aaaa-bbbb-cccc-111122223333"):  # noqa: ANN202
    """A trained night's summary through the same constructors the night uses."""
    ingest = IngestReport(
        datasets=[
            DatasetReport(
                dataset="msrp", contract="msrp.yaml", status="ingested", version="v7",
                splits=[
                    SplitReport(split="train", role="train", files=["a"], sha256=["x"], data_records=4078,
                                clean=4070, quarantined=8, reasons={"empty_text": 5, "bad_label": 3}),
                ],
            ),
            DatasetReport(dataset="stsb", contract="stsb.yaml", status="unchanged", version="v2"),
        ]
    )  # fmt: skip
    gate = GateDecision(
        promote=False, reason="f1 0.81 is not 0.005 above the champion's 0.82", primary="f1",
        challenger_version="3", challenger={"f1": 0.81}, champion_version="2", champion={"f1": 0.82},
        canaries=[CanaryResult("stsb/test", "spearman", 0.70, 0.76, 0.02)],
        precision="int8 (0.2% flips, metric -0.001, 2.9x fp32)",
    )  # fmt: skip
    trained = Trained(
        task="paraphrase", model_dir=str(tmp_path / "m"), config={}, metrics={}, history=[],
        eval_metrics={}, eval_artifacts=[], seconds=754.0,
    )  # fmt: skip
    outcome = TaskOutcome.of(trained, "3", gate.outcome, gate.reason, gate)
    plan = NightPlan(dataset_versions={"msrp": "v7", "stsb": "v2"}, config_hashes={}, skip=None)
    return trained_summary("default", plan, [outcome], 1260.0, run_id, ingest)


def test_the_page_says_what_the_night_did_and_what_its_scoring_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, out = tmp_path / "home", tmp_path / "scored"
    monkeypatch.setenv(night_report.SCORED_ENV, str(out))
    quiet = _monitor(out, "prefect-quiet-run", alarm=False)
    old = _monitor(out, "prefect-old-run", alarm=True)
    day_ago = time.time() - 25 * 3600
    os.utime(old, (day_ago, day_ago))  # scored the night before: not tonight's
    begun = datetime(2026, 11, 29, 2, 0, 3, tzinfo=UTC).isoformat()

    written = publish_night_report(home, _summary(tmp_path), started_at=begun)
    page = Path(written.path)
    assert page == home / "reports" / "2026-11-29-0c1f2a3b" / "night.md"
    text = page.read_text()
    assert text == written.markdown
    # ingest: every split's clean and quarantined counts with their reasons; unchanged sources named
    assert "| msrp | train | ingested | v7 | 4070 | 8 | empty_text 5, bad_label 3 |" in text
    assert "| stsb | - | unchanged | v2 | - | - | - |" in text
    # trained, and how long; the gate with its canaries and precision verdict
    assert "| paraphrase | simpair-paraphrase | 3 | 12.6 min |" in text and "in 21.0 min" in text
    assert "| simpair-paraphrase | 3 | **rejected** | 0/1 passed | int8 (0.2% flips" in text
    assert "| stsb/test | spearman | 0.7000 | 0.7600 | -0.0600 | 0.0200 | FAIL |" in text
    assert "#### simpair-paraphrase: challenger v3 **rejected**" in text
    # scored tonight: the quiet run only, with its drift table and its plot beside the page
    assert "`prefect-quiet-run`" in text and "prefect-old-run" not in text
    assert "| tokens | psi | 0.02 | 0.25 | reference | ok |" in text
    plot = "plots/simpair-paraphrase-v3-quiet-ru/monitor_reference.png"
    assert f"![monitor_reference]({plot})" in text and (page.parent / plot).read_bytes() == PNG
    assert "alarm(s)**" not in text  # no alarm tonight
    # no task measured accuracy on reviewed traffic: the section says so
    assert "## Accuracy on your traffic\n\nNot measured tonight" in text
    assert NightReport.model_validate_json((page.parent / "night.json").read_text()).scoring[
        0
    ].monitor == str(quiet)


def test_a_scoring_run_joins_the_nights_page_and_its_alarm_names_it(tmp_path: Path) -> None:
    home, out = tmp_path / "home", tmp_path / "nowhere"
    summary = _summary(tmp_path)
    summary.tasks[0].traffic.append(
        TrafficAccuracy(metric="f1", value=0.71, low=0.64, high=0.78, n_reviewed=300)
    )
    night = publish_night_report(home, summary, scoring_out=str(out))
    assert "## Scored\n\nNo scoring in this night (output folder" in night.markdown
    assert "No drift table: no scoring in this night." in night.markdown
    assert (
        "| paraphrase | simpair-paraphrase v3 | traffic | f1 | 0.71 | [0.64, 0.78] | 300 |" in night.markdown
    )

    # the nightly-score run after it: its summary's fields and its monitor, added to the same page
    monitor = _monitor(tmp_path / "scored", "prefect-5e0b9d7c-1111", alarm=True)
    fields = {
        "run_id": "prefect-5e0b9d7c-1111", "model_name": "simpair-paraphrase", "model_version": "3",
        "files_scored": 2, "files_quarantined": 1, "rows_scored": 40, "rows_rejected": 1,
        "rows_truncated": 12,
        "pairs_per_s": 88.5, "precision": "fp32", "monitor": str(monitor),
    }  # fmt: skip
    run = ScoredRun.from_summary(fields)
    joined = add_scoring_run(home, run)
    assert joined.path == night.path and joined.alarms == 1
    assert "**1 drift or health alarm(s)**" in joined.markdown
    assert (
        "| `prefect-5e0b9d7c-1111` | simpair-paraphrase | 3 | 2 | 1 | 40 | 1 | 12 | 88.5 | 1 |"
        in joined.markdown
    )
    assert "| tokens | psi | 2.31 | 0.25 | reference | **ALARM** |" in joined.markdown
    (line,) = run.alarm_lines(joined.path)
    assert line == (
        "drift alarm: tokens psi 2.31 > 0.25 against the reference; "
        f"scoring run prefect-5e0b9d7c-1111 of simpair-paraphrase v3; report {night.path}"
    )
    assert (
        add_scoring_run(home, run).markdown.count("`prefect-5e0b9d7c-1111`") == 2
    )  # once scored, once drift

    # a day later no night is open: the scoring run begins a page of its own that says so
    later = night_report.latest_report(home, datetime.now(UTC) + timedelta(hours=25))
    assert later is None
    (Path(night.path).parent / "night.json").write_text("{broken")
    alone = add_scoring_run(home, run)
    assert alone.path != night.path and "No retrain ran in this night" in alone.markdown


tiny_cross = support.tiny_cross


def test_an_in_process_run_whose_traffic_alarms_prints_it_on_stderr_and_joins_the_page(
    tmp_path: Path, tiny_cross: Path
) -> None:
    """`simpair score --no-prefect` on texts ten times longer than usual: many are cut at the model's
    max_length, the run's health alarms; the command prints the alarm line on stderr and counts it in
    its summary, sends nothing (no flow run), and the run's monitor.json reads back into a page."""
    from typer.testing import CliRunner

    from simpair.cli import app
    from simpair.ops.notifications import emit_alarm

    pairs = make_pairs(60, seed=11)
    longer = [" ".join([t] * 10) for t in pairs["text_a"].to_pylist()]
    write_batch(pairs.set_column(pairs.schema.get_field_index("text_a"), "text_a", pa.array(longer)),
                tmp_path / "inbox" / "long.parquet")  # fmt: skip
    args = ["score", "--no-prefect", "--inbox", str(tmp_path / "inbox"), "--out", str(tmp_path / "out"),
            "--model", str(tiny_cross), "--home", str(tmp_path / "home"), "--threads", "1",
            "--json", str(tmp_path / "summary.json")]  # fmt: skip
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["rows_scored"] == 60 and summary["monitor_alarms"] >= 1

    run = ScoredRun.from_summary(summary)
    assert run.alarms == summary["monitor_alarms"] and run.monitor == summary["monitor"]
    (truncated,) = [row for row in run.drift if row.alarm and row.statistic == "truncated"]
    assert truncated.value > truncated.threshold == 0.2
    line = f"drift alarm: {truncated.line()}; scoring run {summary['run_id']} of {run.model} v{run.version}"
    assert line.startswith("drift alarm: truncated rate ") and line in done.stderr.splitlines()
    assert "drift alarm:" not in done.stdout
    assert emit_alarm(run, None) is False  # in process: no flow run, no event, no webhook
    page = add_scoring_run(tmp_path / "home", run)
    assert "No retrain ran in this night" in page.markdown and "| truncated | rate |" in page.markdown
