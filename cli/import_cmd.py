"""CLI command `simpair models import`: register a model the team already has as a registry version.

The work is `simpair.registry.imported.import_model`; this module parses, calls it and prints what
happened (which version, which alias moved, the threshold and precision verdict when a dev file was
given). MLflow and torch are imported inside the command, so `simpair --help` stays fast.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from rich.markup import escape

from simpair import settings
from simpair.cli.common import HomeOption, JsonOutOption, Task, report_console, write_json
from simpair.cli.failures import fail


def import_model(
    source: Annotated[
        str,
        typer.Argument(
            metavar="DIR_OR_HUB_ID",
            help="A sentence-transformers folder, a Hugging Face sequence-classification folder, a hub id "
            "already in the local Hugging Face cache (never downloaded), or a simpair model folder.",
        ),
    ],
    task: Annotated[Task, typer.Option("--task", help="What the model is for: paraphrase or sts.")],
    dev: Annotated[
        str | None,
        typer.Option(
            "--dev",
            metavar="FILE|DATASET/SPLIT",
            help="Labelled pairs (Parquet/CSV/TSV with text_a, text_b and label 0/1 or score 0-1), or an "
            "ingested split: a paraphrase model gets its threshold there, every model a precision verdict. "
            "Without: no threshold (probability only) and auto precision is fp32.",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Registered model name. Default: simpair-<task>.")
    ] = None,
    alias: Annotated[
        str,
        typer.Option(
            "--alias",
            help="auto: champion if the model has none yet, else challenger; or champion, challenger, none.",
        ),
    ] = "auto",
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """Register a model you already have as a version, with its provenance, and set its alias."""
    from simpair.model_import import import_model as run_import
    from simpair.registry.imported import ImportRefused

    out = report_console(json_out)
    try:
        result = run_import(
            settings.home_dir(home),
            source,
            str(task.value),
            dev=dev,
            name=name,
            alias=alias,  # type: ignore[arg-type]
        )
    except ImportRefused as exc:
        fail(str(exc), exc)
    for line in result.lines():
        out.print(escape(line), soft_wrap=True)
    write_json(dataclasses.asdict(result), json_out)


def register(models_app: typer.Typer) -> None:
    """Add `import` to the `simpair models` group."""
    models_app.command("import")(import_model)
