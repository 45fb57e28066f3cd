"""CLI command `simpair train`: one cross- or bi-encoder from a training config.

The command parses its options, calls `simpair.training` and prints the model directory, dev metrics
and (unless --no-evaluate) the evaluation on the config's evaluate_on splits. Torch is imported inside
the command, so `simpair --help` stays fast.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    json_owns_stdout,
    load_config,
    print_eval,
    report_console,
    write_json,
)


def train(
    config: Annotated[Path, typer.Option(help="Training config (YAML), e.g. configs/msrp-cross.yaml.")],
    home: HomeOption = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a config field: --set epochs=1 --set learning_rate=5e-5."),
    ] = None,
    evaluate: Annotated[
        bool, typer.Option(help="Evaluate on the config's evaluate_on splits after training.")
    ] = True,
    json_out: JsonOutOption = None,
) -> None:
    """Train a cross- or bi-encoder as the config says; prints the model directory and dev metrics.

    Several GPUs (or CPU processes): torchrun --nproc-per-node N -m simpair.training --config X.
    """
    from simpair import settings

    config.open("rb").close()  # a missing config fails in a second, not after torch is imported
    from simpair.training import train as train_model

    cfg = load_config(config, set_)
    home_path = settings.home_dir(home)
    result = train_model(cfg, home_path)
    shown = report_console(json_out)
    shown.print(f"model: {result.model_dir}", soft_wrap=True)
    shown.print_json(json.dumps(result.metrics.get("dev", {})))
    evaluated = None
    if evaluate and cfg.evaluate_on:
        from simpair.evaluation.splits import evaluate_model

        splits = [(r.dataset, r.split) for r in cfg.evaluate_on]
        evaluated = evaluate_model(result.model_dir, home_path, splits)
        print_eval(shown, evaluated)
    evaluation = asdict(evaluated) if evaluated is not None else None
    write_json({"model_dir": result.model_dir, "metrics": result.metrics, "evaluation": evaluation}, json_out)


def register(app: typer.Typer) -> None:
    """Add `simpair train` to the top-level app."""
    app.command("train")(json_owns_stdout(train))
