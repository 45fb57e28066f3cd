"""CLI command `simpair soup`: the weights of one backbone's fine-tunes averaged into one model.

A greedy soup chosen on dev, from trained members (`--member`) or from a soup config (`--config`) whose
ingredients it trains first (the same config path as `stack` and `cascade`).
"""

from __future__ import annotations

import json
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
    print_eval,
    resolve_model_option,
    train_combined_from_config,
)


def soup(
    member: Annotated[
        list[str] | None,
        typer.Option(help="A fine-tune of one backbone (directory or registry ref; repeat)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Or: a soup config (combine: soup), e.g. configs/stsb-bi-soup.yaml: trains its "
            "ingredients (every member config once per seed), then soups them."
        ),
    ] = None,
    out: ModelDirOutOption = None,
    home: HomeOption = None,
    split: EvaluateAfterOption = None,
    remove_directions: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="With --member, bi-encoders: centre the soup's embeddings and remove this many top "
            "directions (default: what the ingredients were trained with).",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="With --config: override a field in every ingredient's training config."),
    ] = None,
    jobs: JobsOption = 1,
) -> None:
    """Average the weights of fine-tunes (e.g. two seeds) into one model: a greedy soup chosen on dev.

    From trained --member models, or from a soup config (--config) whose ingredients it trains
    first. To combine different models' outputs instead, use `simpair stack`.
    """
    from simpair import settings
    from simpair.ensemble import fit_soup
    from simpair.models.io import new_model_dir

    if (config is None) == (not member):
        raise typer.BadParameter("give either --config or --member (repeat it)", param_hint="--config")
    home_path = settings.home_dir(home)
    splits = [parse_split_option(s) for s in split] if split else []
    if config is not None:
        if remove_directions is not None:
            raise typer.BadParameter(
                "--remove-directions applies to --member soups; a soup config's ingredients set "
                "their own postprocess",
                param_hint="--remove-directions",
            )
        train_combined_from_config(config, home_path, set_, jobs, out, splits, combine="soup")
        return
    members = [resolve_model_option(m, home_path) for m in member or []]
    try:
        target = fit_soup(
            members, home_path, out or new_model_dir(home_path / "models", "soup"), remove_directions
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--member") from exc
    shown = console()
    shown.print(f"model: {target}", soft_wrap=True)  # a path is copied whole, never wrapped
    metrics = json.loads((target / "metrics.json").read_text())
    shown.print_json(json.dumps({"dev": metrics["dev"], "soup": metrics["soup"]}))
    if splits:
        from simpair.evaluation.splits import evaluate_model

        print_eval(shown, evaluate_model(target, home_path, splits))


def register(app: typer.Typer) -> None:
    """Add `simpair soup` to the top-level app."""
    app.command("soup")(soup)
