"""`simpair models verdict`: the one command (besides registration and import) that measures a ladder.

A real tiny cross-encoder with a dev split ingested into the test's home, the embedded registry and
the CLI through typer's runner: measured once and stored, shown again without measuring, refused in
one line for a model with no dev split.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_scoring_int8 import _ingest_toy, _tiny_with_dev
from typer.testing import CliRunner

from simpair.cli import app
from simpair.models import save_tiny_model
from simpair.models.precision_verdict import PrecisionVerdict
from simpair.registry import registry
from simpair.registry.record import register_trained_model
from simpair.selection import precision_ladder as ladder


def test_verdict_measures_once_stores_and_tags_then_shows_without_measuring(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    dev_ids = _ingest_toy(home, tmp_path)
    model = _tiny_with_dev(tmp_path / "m", dev_ids)
    version = register_trained_model(home, model, {"name": "m"}, {"dev_f1": 0.5}).version
    runner = CliRunner()
    ref = f"simpair-paraphrase/{version}"

    first = runner.invoke(app, ["models", "verdict", ref, "--home", str(home)])
    assert first.exit_code == 0, first.output
    tags = registry.client(home).get_model_version("simpair-paraphrase", version).tags
    assert tags["simpair.precision.dev_split"] == "toy/dev" and tags["simpair.precision.pairs"] == "120"
    assert first.output.startswith(f"{ref}: {tags['simpair.precision.why']}; measured ")

    def measured_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stored verdict is shown, not measured again")

    monkeypatch.setattr(ladder, "measure", measured_again)
    again = runner.invoke(app, ["models", "verdict", ref, "--home", str(home)])
    assert again.exit_code == 0 and again.output == first.output


def test_verdict_of_a_model_without_dev_split_fails_in_one_line(home: Path, tmp_path: Path) -> None:
    bare = save_tiny_model(tmp_path / "bare", task="paraphrase", kind="cross")
    result = CliRunner().invoke(app, ["models", "verdict", str(bare), "--home", str(home)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no precision verdict for ")
    assert "records no dev split" in lines[0] and PrecisionVerdict.read(bare) is None
