"""CLI commands that combine trained models into one: `simpair stack`, `simpair soup`, `simpair cascade`.

- `stack`: a linear model on several models' outputs, fitted on dev.
- `soup`: the weights of one backbone's fine-tunes averaged into one model, a greedy soup chosen on dev.
- `cascade`: a bi-encoder first, the cross-encoder only on the pairs it is unsure of.

Each combines trained members (`--member`, or `--cross` and `--bi`) or a config (`--config`) whose
members it trains first, through `simpair.ensemble.train.train_stack_file`, the one path all three
configs take (`_combine`). The result is a model directory like any other: evaluate, predict,
register and score it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simpair.cli.common import (
    HomeOption,
    console,
    parse_sets,
    parse_split_option,
    print_eval,
    resolve_model_option,
    validation_message,
)
from simpair.cli.failures import fail

if TYPE_CHECKING:
    from rich.console import Console

    from simpair.ensemble.band_pool import BandPool

ModelDirOutOption = Annotated[Path | None, typer.Option(help="Output model directory.")]
EvaluateAfterOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Evaluate on DATASET/SPLIT afterwards (repeatable). Default with --config: evaluate_on."
    ),
]
JobsOption = Annotated[
    int,
    typer.Option(
        min=1,
        help="With --config: train this many members at once, each in its own process with "
        "cores/jobs threads (CPU: 2 on 2 cores halves a two-member stack's wall time).",
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="With --config: override a field in every member's training config."),
]


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
    set_: SetOption = None,
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

    def fit() -> Path:
        members = [resolve_model_option(m, home_path) for m in member or []]
        target = out or new_model_dir(home_path / "models", "stack")
        return fit_stack(members, home_path, target, lexical, zero_shot=zero_shot, products=products)

    _combine(config, home_path, splits, set_, jobs, out, combine=None, fit=fit, hint="--member")


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
    set_: SetOption = None,
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
    if config is not None and remove_directions is not None:
        raise typer.BadParameter(
            "--remove-directions applies to --member soups; a soup config's ingredients set "
            "their own postprocess",
            param_hint="--remove-directions",
        )
    members = [resolve_model_option(m, home_path) for m in member or []]

    def fit() -> Path:
        target = out or new_model_dir(home_path / "models", "soup")
        return fit_soup(members, home_path, target, remove_directions)

    _combine(config, home_path, splits, set_, jobs, out, combine="soup", fit=fit, hint="--member", key="soup")


def cascade(
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
        typer.Option(help="Or: a cascade config (combine: cascade): trains its members, then fits the band."),
    ] = None,
    max_disagreement: Annotated[
        float,
        typer.Option(
            min=0.0, max=0.999, help="Share of dev decisions that may differ from the cross-encoder's."
        ),
    ] = 0.005,
    band_pool: Annotated[
        Path | None,
        typer.Option(
            help="Unlabeled pairs like the traffic (Parquet/CSV/TSV with text_a, text_b, or a folder of "
            "them, e.g. an inbox), fitted on beside dev: the cross-encoder's decisions are the reference. "
            "Never an evaluation split."
        ),
    ] = None,
    band_pool_split: Annotated[
        str | None,
        typer.Option(
            metavar="DATASET/SPLIT",
            help="Or: a train or dev split of the catalog as the pool, e.g. the cross-encoder's training "
            "pairs (msrp/train). Never a test split.",
        ),
    ] = None,
    band_pool_pairs: Annotated[
        int, typer.Option(min=1, help="Pairs drawn from --band-pool or --band-pool-split.")
    ] = 4096,
    out: ModelDirOutOption = None,
    home: HomeOption = None,
    split: EvaluateAfterOption = None,
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
    _check_cascade_pool(config, band_pool, band_pool_split, {f"{d}/{s}" for d, s in splits})

    def fit() -> Path:
        pool = _read_band_pool(band_pool, band_pool_split, band_pool_pairs, home_path)
        members = [resolve_model_option(cross, home_path)]
        members += [resolve_model_option(bi, home_path)] if bi else []
        target = out or new_model_dir(home_path / "models", "cascade")
        return fit_cascade(members, home_path, target, max_disagreement, zero_shot=bi is None, pool=pool)

    _combine(config, home_path, splits, None, jobs, out, combine="cascade", fit=fit, hint="--cross")


def _combine(
    config: Path | None,
    home: Path,
    splits: list[tuple[str, str]],
    sets: list[str] | None,
    jobs: int,
    out: Path | None,
    *,
    combine: str | None,
    fit: Callable[[], Path],
    hint: str,
    key: str = "members",
) -> None:
    """What `stack`, `soup` and `cascade` share once their own options are checked: with --config,
    train the config's members and combine them (`train_stack_file`, `combine` refusing a config
    that combines another way); otherwise `fit()` combines the given members, a ValueError being a
    usage error on `hint`. Then the model's directory and dev figures (the members' under `key` when
    fitted here), and its evaluation on --split (with --config, by default the config's evaluate_on).
    """
    from simpair.ensemble.train import MemberFailed, train_stack_file

    if config is not None:
        overrides = parse_sets(sets)
        try:
            result = train_stack_file(config, home, overrides, jobs, out, combine=combine)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--config") from exc
        except MemberFailed as exc:
            fail(str(exc), exc)
        _print_combined(console(), result.model_dir, home, splits or result.evaluate_on, "members")
        return
    try:
        target = fit()
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from exc
    _print_combined(console(), target, home, splits, key)


def _print_combined(
    console: Console, target: Path, home: Path, splits: list[tuple[str, str]], key: str
) -> None:
    """The stack's, soup's or cascade's directory and dev metrics, then its evaluation on `splits`."""
    console.print(f"model: {target}", soft_wrap=True)  # a path is copied whole, never wrapped
    metrics = json.loads((target / "metrics.json").read_text())
    members = metrics.get("members_dev") or metrics.get("soup") or metrics.get("cascade")
    console.print_json(json.dumps({"dev": metrics["dev"], key: members}))
    if splits:
        from simpair.evaluation.splits import evaluate_model

        print_eval(console, evaluate_model(target, home, splits))


def _check_cascade_pool(
    config: Path | None, band_pool: Path | None, band_pool_split: str | None, evaluated: set[str]
) -> None:
    """Refuse, before any work, a band pool given twice, or one that --split evaluates afterwards
    (`evaluated`: its DATASET/SPLITs): the band would be measured on the pairs it was fitted on."""
    if config is not None and (band_pool is not None or band_pool_split is not None):
        raise typer.BadParameter(
            "with --config, the pool is the config's band_pool:", param_hint="--band-pool"
        )
    if band_pool is not None and band_pool_split is not None:
        raise typer.BadParameter("give --band-pool or --band-pool-split, not both", param_hint="--band-pool")
    if config is not None:
        pooled = _config_pool_split(config)
        if pooled in evaluated:
            raise typer.BadParameter(
                f"{pooled} is {config}'s band_pool: evaluating on it afterwards would measure the band "
                "on the pairs it was fitted on",
                param_hint="--split",
            )
    elif band_pool_split is not None and band_pool_split in evaluated:
        raise typer.BadParameter(
            f"{band_pool_split} is evaluated afterwards (--split): it cannot also fit the band",
            param_hint="--band-pool-split",
        )


def _read_band_pool(
    band_pool: Path | None, band_pool_split: str | None, pairs: int, home: Path
) -> BandPool | None:
    """The cascade's unlabeled band pool from --band-pool or --band-pool-split (None without either);
    a pool that cannot be read is a usage error on the option that named it."""
    from pydantic import ValidationError

    from simpair.ensemble.band_pool import BandPoolRef, read_pool

    if not band_pool and not band_pool_split:
        return None
    hint = "--band-pool" if band_pool else "--band-pool-split"
    try:
        source = {"path": str(band_pool)} if band_pool else {"split": band_pool_split}
        return read_pool(BandPoolRef(**source, pairs=pairs), home)
    except ValidationError as exc:
        raise typer.BadParameter(validation_message(exc), param_hint=hint) from exc
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from exc


def _config_pool_split(config: Path) -> str | None:
    """The DATASET/SPLIT a cascade config fits its band on, if any (a broken config fails later, whole)."""
    from simpair.ensemble.config import StackConfig

    try:
        pool = StackConfig.from_yaml(config).band_pool
    except (OSError, ValueError):
        return None
    return pool.split if pool is not None else None


def register(app: typer.Typer) -> None:
    """Add `simpair cascade`, `simpair stack` and `simpair soup` to the top-level app (in that order)."""
    app.command("cascade")(cascade)
    app.command("stack")(stack)
    app.command("soup")(soup)
