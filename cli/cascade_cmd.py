"""CLI command `simpair cascade`: a bi-encoder first, the cross-encoder only on the pairs it is unsure of.

From a trained cross-encoder (`--cross`, with `--bi` or the backbone untouched) or from a cascade config
(`--config`) whose members it trains first (the same config path as `stack` and `soup`).
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
    validation_message,
)


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
    from pydantic import ValidationError

    from simpair import settings
    from simpair.ensemble import fit_cascade
    from simpair.ensemble.band_pool import BandPoolRef, read_pool
    from simpair.models.io import new_model_dir

    if (config is None) == (cross is None):
        raise typer.BadParameter("give either --config or --cross", param_hint="--config")
    home_path = settings.home_dir(home)
    splits = [parse_split_option(s) for s in split] if split else []
    if config is not None and (band_pool is not None or band_pool_split is not None):
        raise typer.BadParameter(
            "with --config, the pool is the config's band_pool:", param_hint="--band-pool"
        )
    if band_pool is not None and band_pool_split is not None:
        raise typer.BadParameter("give --band-pool or --band-pool-split, not both", param_hint="--band-pool")
    evaluated = {f"{d}/{s}" for d, s in splits}
    if config is not None:
        pooled = _config_pool_split(config)
        if pooled in evaluated:
            raise typer.BadParameter(
                f"{pooled} is {config}'s band_pool: evaluating on it afterwards would measure the band "
                "on the pairs it was fitted on",
                param_hint="--split",
            )
        train_combined_from_config(config, home_path, None, jobs, out, splits, combine="cascade")
        return
    if band_pool_split is not None and band_pool_split in evaluated:
        raise typer.BadParameter(
            f"{band_pool_split} is evaluated afterwards (--split): it cannot also fit the band",
            param_hint="--band-pool-split",
        )
    hint = "--band-pool" if band_pool else "--band-pool-split"
    try:
        source = {"path": str(band_pool)} if band_pool else {"split": band_pool_split}
        ref = BandPoolRef(**source, pairs=band_pool_pairs) if band_pool or band_pool_split else None
        pool = read_pool(ref, home_path) if ref is not None else None
    except ValidationError as exc:
        raise typer.BadParameter(validation_message(exc), param_hint=hint) from exc
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from exc
    try:
        members = [resolve_model_option(cross, home_path)]
        members += [resolve_model_option(bi, home_path)] if bi else []
        target = fit_cascade(
            members,
            home_path,
            out or new_model_dir(home_path / "models", "cascade"),
            max_disagreement,
            zero_shot=bi is None,
            pool=pool,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--cross") from exc
    print_combined(console(), target, home_path, splits)


def _config_pool_split(config: Path) -> str | None:
    """The DATASET/SPLIT a cascade config fits its band on, if any (a broken config fails later, whole)."""
    from simpair.ensemble.config import StackConfig

    try:
        pool = StackConfig.from_yaml(config).band_pool
    except (OSError, ValueError):
        return None
    return pool.split if pool is not None else None


def register(app: typer.Typer) -> None:
    """Add `simpair cascade` to the top-level app."""
    app.command("cascade")(cascade)
