"""CLI command `simpair stack`: a linear model on several models' outputs, fitted on dev.

From trained members (`--member`) or from a stack config (`--config`) whose members it trains first,
through `simpair.ensemble.train.train_stack_file`, the one path `soup` and `cascade` configs take too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from simpair.cli.common import (
    EvaluateAfterOption,
    HomeOption,
    JobsOption,
    ModelDirOutOption,
    console,
    parse_split_option,
    print_combined,
    resolve_model_option,
    train_combined_from_config,
)


def stack(
    config: Annotated[
        Path | None,
        typer.Option(
            help="Stack config (YAML with members:), e.g. configs/stsb-stack.yaml: trains its members, "
            "then stacks them. A soup config (combine: soup) also works here; `simpair soup --config` "
            "is its usual name."
        ),
    ] = None,
    member: Annotated[
        list[str] | None,
        typer.Option(help="Or: an already trained member (directory or registry ref; repeat, two or more)."),
    ] = None,
    out: ModelDirOutOption = None,
    home: HomeOption = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a field in every member's training config."),
    ] = None,
    lexical: Annotated[bool, typer.Option(help="Add word-overlap and length-ratio features.")] = True,
    zero_shot: Annotated[
        bool,
        typer.Option(help="Add the members' pre-trained backbone, untouched, as one more member."),
    ] = False,
    products: Annotated[
        bool,
        typer.Option(help="Add the members' outputs squared and multiplied pairwise (degree 2)."),
    ] = False,
    split: EvaluateAfterOption = None,
    jobs: JobsOption = 1,
) -> None:
    """Stack models: a linear model on their outputs (e.g. a cross- and a bi-encoder), fitted on dev.

    From trained --member models, or from a stack config (--config) whose members it trains
    first. To average one backbone's fine-tunes into one model, use `simpair soup`.
    The result is a model directory like any other: evaluate, predict, register and score it.
    """
    from simpair import settings
    from simpair.ensemble import fit_stack
    from simpair.models.io import new_model_dir

    if (config is None) == (not member):
        raise typer.BadParameter("give either --config or --member (two or more)", param_hint="--config")
    home_path = settings.home_dir(home)
    splits = [parse_split_option(s) for s in split] if split else []
    if config is not None:
        train_combined_from_config(config, home_path, set_, jobs, out, splits, combine=None)
        return
    try:
        members = [resolve_model_option(m, home_path) for m in member or []]
        target = fit_stack(
            members,
            home_path,
            out or new_model_dir(home_path / "models", "stack"),
            lexical,
            zero_shot=zero_shot,
            products=products,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--member") from exc
    print_combined(console(), target, home_path, splits)


def register(app: typer.Typer) -> None:
    """Add `simpair stack` to the top-level app."""
    app.command("stack")(stack)
