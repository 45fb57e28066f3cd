"""The Prefect tasks run on a real (temporary) Prefect API and carry the `gpu` tag for routing."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_training_toydata import write_toy_home

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.integration
def test_pretokenize_train_evaluate_tasks_in_a_flow(home: Path, prefect_api: None) -> None:
    from prefect import flow

    from simpair.tasks.training import evaluate_task, pretokenize_task, train_task

    for t in (pretokenize_task, train_task, evaluate_task):
        assert "gpu" in t.tags

    from simpair.training import TrainConfig

    @flow
    def tiny_retrain(path: str, home: Path) -> dict:
        config = TrainConfig.from_yaml(path)  # a step takes the config, as the training DAG passes it
        tokens = pretokenize_task(config, home)
        trained = train_task(config, home)
        evaluated = evaluate_task(trained.model_dir, home, [("msrp", "test")], group_pattern=r"-00([01])\d$")
        return {"tokens": tokens, "trained": trained, "evaluated": evaluated}

    write_toy_home(home)
    out = tiny_retrain(str(REPO / "configs" / "smoke-paraphrase.yaml"), home)
    assert {t.split for t in out["tokens"]} == {"train", "test"}
    assert (out["trained"].model_dir / "simpair.json").exists()
    # Trained on msrp/train only: no msrp/test pair leaks into it, so none is excluded.
    assert out["evaluated"].metrics["splits"]["msrp/test"]["evaluated"] == 24
    groups = out["evaluated"].metrics["splits"]["msrp/test"]["by_group"]
    assert [g["evaluated"] for g in groups.values()] == [10, 10, 4]
    assert "### msrp/test by group" in out["evaluated"].report_path.read_text()  # what the artifact shows
