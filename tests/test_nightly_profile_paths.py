"""A nightly profile's task configs resolve beside the profile file first, then among the shipped files."""

from __future__ import annotations

import shutil
from pathlib import Path

from simpair import settings
from simpair.nightly.night import with_dispatch
from simpair.nightly.profile import load_profile

PROFILE = """\
name: mine
tasks:
  paraphrase:
    config: my-para.yaml
    evaluate: [[msrp, test]]
    gate: {primary: f1, margin: 0.0, guardrails: {}}
  sts:
    config: configs/smoke-sts.yaml
    evaluate: [[stsb, test]]
    gate: {primary: spearman, margin: 0.0, guardrails: {}}
"""


def test_a_task_config_beside_the_profile_is_that_file(tmp_path: Path) -> None:
    """`config: my-para.yaml` beside a profile of one's own resolved against the checkout (or the
    installed package) only, where there is no such file."""
    shutil.copy(settings.shipped_path("configs/smoke-paraphrase.yaml"), tmp_path / "my-para.yaml")
    (tmp_path / "mine.yaml").write_text(PROFILE)
    plan = load_profile(tmp_path / "mine.yaml")
    assert plan.tasks["paraphrase"].config_path() == tmp_path / "my-para.yaml"
    # a shipped config named from the project root still resolves there
    assert plan.tasks["sts"].config_path() == settings.shipped_path("configs/smoke-sts.yaml")
    assert plan.tasks["sts"].config_path().is_file()
    # and the night's copy of the profile (another dispatch mode) still finds the file beside it
    pooled = with_dispatch(plan, "pool")
    assert pooled.tasks["paraphrase"].config_path() == tmp_path / "my-para.yaml"


def test_the_shipped_profiles_still_find_their_configs() -> None:
    for name in ("smoke", "default"):
        for task in load_profile(name).tasks.values():
            assert task.config_path().is_file(), (name, task.config)
