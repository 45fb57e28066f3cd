"""A nightly task whose config is a stack: members trained side by side in their own processes, one
stacked model registered and gated (Prefect's temporary API, embedded MLflow, the smoke profile).

Its own file so that pytest-xdist runs it beside `test_nightly.py`'s first-night stories.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from prefect_artifacts import newest_artifact as _artifact
from registry_helpers import one_torch_thread  # noqa: F401 - fixture

from simpair import settings
from simpair.flows.launch import nightly as run
from simpair.registry import resolve_model
from simpair.runtime.loader import load_predictor

pytestmark = [
    pytest.mark.usefixtures("prefect_api", "one_torch_thread"),
    pytest.mark.slow,
    pytest.mark.integration,
]


def test_a_stack_config_in_the_profile_trains_members_and_registers_one_stacked_model(
    home: Path, shared_data: Path, tmp_path: Path
) -> None:
    """A nightly task may point at a stack config: every member trains (a nested soup of two seeds
    first), the zero-shot backbone joins, and the stack is what gets gated. With `jobs: 2` the
    members train side by side, each its own task in its own process, to the same stack as one after
    the other. (Members one after the other in the night: tests/test_cascade.py's night.)"""
    jobs = 2
    configs = settings.PROJECT_ROOT / "configs"
    cross = yaml.safe_load((configs / "smoke-sts.yaml").read_text())
    cross.update(name="smoke-sts-cross", kind="cross", objective="bce")
    (tmp_path / "smoke-sts-cross.yaml").write_text(yaml.safe_dump(cross))
    soup = {"name": "smoke-soup", "task": "sts", "members": [str(configs / "smoke-sts.yaml")]}
    (tmp_path / "soup.yaml").write_text(yaml.safe_dump({**soup, "seeds": [1, 2], "combine": "soup"}))
    stack = {
        "name": "smoke-sts-stack",
        "task": "sts",
        "members": ["soup.yaml", "smoke-sts-cross.yaml"],
        "zero_shot": True,
    }
    (tmp_path / "stack.yaml").write_text(yaml.safe_dump(stack))
    profile = yaml.safe_load((configs / "nightly-smoke.yaml").read_text())
    profile["tasks"] = {
        "sts": {**profile["tasks"]["sts"], "config": str(tmp_path / "stack.yaml"), "jobs": jobs}
    }
    (tmp_path / "nightly-stack.yaml").write_text(yaml.safe_dump(profile))

    first = run(profile=str(tmp_path / "nightly-stack.yaml"), home=home, sources=shared_data)
    assert first.status == "trained" and [(t.task, t.version) for t in first.tasks] == [("sts", "1")]
    c = MlflowClient(tracking_uri=settings.tracking_uri(home), registry_uri=settings.tracking_uri(home))
    assert c.get_model_version("simpair-sts", "1").tags["kind"] == "stacked"
    resolved = resolve_model("simpair-sts/1", home)
    predictor = load_predictor(resolved.local_dir)
    assert predictor.kind == "stacked" and len(predictor.members) == 3  # soup, cross, zero-shot
    assert "Stacked `smoke-sts-stack`" in _artifact("stack-smoke-sts-stack")
    assert "Souped `smoke-soup`" in _artifact("soup-smoke-soup")
    for member in ("smoke-sts-s1", "smoke-sts-s2", "smoke-sts-cross"):
        assert "| dev metric | value |" in _artifact(f"train-{member}")  # each member its own task
    if jobs > 1:  # side by side gives the stack that one after the other gives
        from simpair.ensemble import StackConfig, train_stack

        alone = train_stack(StackConfig.from_yaml(tmp_path / "stack.yaml"), home)
        stacked = json.loads((Path(resolved.local_dir) / "metrics.json").read_text())
        assert stacked["dev"]["spearman"] == pytest.approx(alone.metrics["dev"]["spearman"], abs=1e-6)
    again = run(profile=str(tmp_path / "nightly-stack.yaml"), home=home, sources=shared_data)
    assert again.status == "skipped"  # members' configs are part of the hash: unchanged, nothing to do
