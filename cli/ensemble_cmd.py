"""CLI commands that combine models: `simpair stack` (outputs, fitted on dev), `simpair soup` (weights),
`simpair cascade` (a bi-encoder first, the cross-encoder on the pairs it is unsure of).

Both also train from a config (`--config`) through one domain path,
`simpair.ensemble.train.train_stack_file`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from simpair.cli.common import (
    HomeOption,
    JobsOption,
    parse_sets,
    parse_split_option,
    print_eval,
    resolve_model_option,
)


def register(app: typer.Typer) -> None:
    """Add the stack, soup and cascade commands to the top-level app."""
    _register_cascade(app)

    @app.command("stack")
    def stack_cmd(
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
            typer.Option(
                help="Or: an already trained member (directory or registry ref; repeat, two or more)."
            ),
        ] = None,
        out: Annotated[Path | None, typer.Option(help="Output model directory.")] = None,
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
        split: Annotated[
            list[str] | None,
            typer.Option(help="Evaluate on DATASET/SPLIT afterwards (repeatable). Default: evaluate_on."),
        ] = None,
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
            _train_from_config(config, home_path, set_, jobs, out, splits, combine=None)
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
        _print_combined(Console(), target, home_path, splits)

    @app.command("soup")
    def soup_cmd(
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
        out: Annotated[Path | None, typer.Option(help="Output model directory.")] = None,
        home: HomeOption = None,
        split: Annotated[
            list[str] | None,
            typer.Option(
                help="Evaluate on DATASET/SPLIT afterwards (repeatable). Default with --config: evaluate_on."
            ),
        ] = None,
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
            typer.Option(
                "--set", help="With --config: override a field in every ingredient's training config."
            ),
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
            _train_from_config(config, home_path, set_, jobs, out, splits, combine="soup")
            return
        members = [resolve_model_option(m, home_path) for m in member or []]
        try:
            target = fit_soup(
                members, home_path, out or new_model_dir(home_path / "models", "soup"), remove_directions
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--member") from exc
        console = Console()
        console.print(f"model: {target}", soft_wrap=True)  # a path is copied whole, never wrapped
        metrics = json.loads((target / "metrics.json").read_text())
        console.print_json(json.dumps({"dev": metrics["dev"], "soup": metrics["soup"]}))
        if splits:
            from simpair.evaluate import evaluate_model

            print_eval(console, evaluate_model(target, home_path, splits))


def _register_cascade(app: typer.Typer) -> None:
    @app.command("cascade")
    def cascade_cmd(
        cross: Annotated[
            str | None, typer.Option(help="A trained paraphrase cross-encoder (directory or registry ref).")
        ] = None,
        bi: Annotated[
            str | None,
            typer.Option(
                help="A trained paraphrase bi-encoder (default: the cross-encoder's backbone, untouched)."
            ),
        ] = None,
        config: Annotated[
            Path | None,
            typer.Option(
                help="Or: a cascade config (combine: cascade): trains its members, then fits the band."
            ),
        ] = None,
        max_disagreement: Annotated[
            float,
            typer.Option(
                min=0.0, max=0.999, help="Share of dev decisions that may differ from the cross-encoder's."
            ),
        ] = 0.005,
        out: Annotated[Path | None, typer.Option(help="Output model directory.")] = None,
        home: HomeOption = None,
        split: Annotated[
            list[str] | None,
            typer.Option(
                help="Evaluate on DATASET/SPLIT afterwards (repeatable). Default with --config: evaluate_on."
            ),
        ] = None,
        jobs: JobsOption = 1,
    ) -> None:
        """A bi -> cross cascade: the bi stage scores every pair, the cross-encoder only the pairs in a band
        of uncertain bi probabilities, fitted on dev to agree with the cross-encoder alone.
        """
        from simpair import settings
        from simpair.ensemble import fit_cascade
        from simpair.models.io import new_model_dir

        if (config is None) == (cross is None):
            raise typer.BadParameter("give either --config or --cross", param_hint="--config")
        home_path = settings.home_dir(home)
        splits = [parse_split_option(s) for s in split] if split else []
        if config is not None:
            _train_from_config(config, home_path, None, jobs, out, splits, combine="cascade")
            return
        try:
            members = [resolve_model_option(cross, home_path)]
            members += [resolve_model_option(bi, home_path)] if bi else []
            target = fit_cascade(
                members,
                home_path,
                out or new_model_dir(home_path / "models", "cascade"),
                max_disagreement,
                zero_shot=bi is None,
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--cross") from exc
        _print_combined(Console(), target, home_path, splits)


def _train_from_config(
    config: Path,
    home: Path,
    sets: list[str] | None,
    jobs: int,
    out: Path | None,
    splits: list[tuple[str, str]],
    combine: str | None,
) -> None:
    """`simpair stack --config` and `simpair soup --config`: one path for both."""
    from simpair.ensemble.train import MemberFailed, train_stack_file

    overrides = parse_sets(sets)
    try:
        result = train_stack_file(config, home, overrides, jobs, out, combine=combine)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    except MemberFailed as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    _print_combined(Console(), result.model_dir, home, splits or result.evaluate_on)


def _print_combined(console: Console, target: Path, home: Path, splits: list[tuple[str, str]]) -> None:
    """The stack's, soup's or cascade's directory and dev metrics, then its evaluation on `splits`."""
    console.print(f"model: {target}", soft_wrap=True)
    metrics = json.loads((target / "metrics.json").read_text())
    console.print_json(
        json.dumps(
            {
                "dev": metrics["dev"],
                "members": metrics.get("members_dev") or metrics.get("soup") or metrics.get("cascade"),
            }
        )
    )
    if splits:
        from simpair.evaluate import evaluate_model

        print_eval(console, evaluate_model(target, home, splits))
