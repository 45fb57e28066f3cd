"""`simpair evaluate --transfer`: a model beside its untrained backbone in its domain and off it.

Toy home (msrp and stsb), tiny models; the zero-shot figures are checked against scoring the backbone
directly, and the cross-task split is read threshold-free.
"""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest
from registry_helpers import one_torch_thread, tiny_model  # noqa: F401 - fixture
from test_training_toydata import write_toy_home
from typer.testing import CliRunner

from simpair.cli import app
from simpair.evaluation.zero_shot_baseline import zero_shot_model
from simpair.registry import tracking
from simpair.selection.promotion import canary_exclusions, evaluate
from simpair.selection.transfer import transfer_report

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize(
    ("task", "cross", "metric"), [("sts", "msrp/test", "roc_auc"), ("paraphrase", "stsb/test", "spearman")]
)
def test_transfer_rows_put_the_model_beside_its_backbone(
    home: Path, task: str, cross: str, metric: str
) -> None:
    write_toy_home(home)
    model = tiny_model(home / "m", home, task=task, kind="bi")
    report = transfer_report(model, home, home / "out")
    kinds = {r.split: (r.kind, r.metric) for r in report.rows}
    in_domain = "stsb/test" if task == "sts" else "msrp/test"
    assert kinds[in_domain][0] == "in-domain" and kinds[cross] == ("cross-task", metric)
    # the backbone's figure is the zero-shot model's, scored on the same pairs
    sets = [tuple(r.split.split("/")) for r in report.rows]
    zs = zero_shot_model("tiny", task, home, threshold_dataset=sets[0][0])
    direct = evaluate(zs, home, sets, canary_exclusions(home, sets, model), home / "direct").metrics
    for r in report.rows:
        assert r.zero_shot == pytest.approx(direct[f"{r.split}/{r.metric}"])
        assert r.delta == pytest.approx(r.model - r.zero_shot) and r.pairs > 0
    assert (home / "out" / "transfer.md").read_text().count("|") > 20


def test_cli_transfer_prints_and_records_an_mlflow_run(home: Path) -> None:
    write_toy_home(home)
    model = tiny_model(home / "m", home, task="sts", kind="bi")
    result = CliRunner().invoke(app, ["evaluate", "--model", str(model), "--transfer", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "cross-task" in result.output and "msrp/test" in result.output and "MLflow run" in result.output
    tracking.configure(home)
    runs = mlflow.search_runs(
        experiment_ids=[tracking.ensure_experiment(home)], filter_string="tags.`simpair.stage` = 'transfer'"
    )
    assert len(runs) == 1 and "metrics.transfer/msrp/test/roc_auc/zero_shot" in runs.columns
    clash = CliRunner().invoke(app, ["evaluate", "--model", str(model), "--transfer", "--split", "stsb/test"])
    assert clash.exit_code != 0 and "--transfer picks its own splits" in clash.output
