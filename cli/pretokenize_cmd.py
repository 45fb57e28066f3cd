"""CLI command `simpair pretokenize`: tokenize the splits a training config reads, once.

The tokens land in <home>/tokens/ keyed by tokenizer, max length and dataset version, so `train` and the
nightly run reuse them. The tokenizer is imported inside the command, so `simpair --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from simpair.cli.common import HomeOption, console, load_config


def pretokenize(
    config: Annotated[Path, typer.Option(help="Training config (YAML): tokenize every split it reads.")],
    home: HomeOption = None,
) -> None:
    """Tokenize the splits a training config needs into <home>/tokens/ (reused when already there)."""
    from simpair import settings
    from simpair.training.pretokenize import pretokenize_config

    cfg = load_config(config, None)
    table = Table("dataset/split", "rows", "cache", "key")
    for ts in pretokenize_config(cfg, settings.home_dir(home)):
        table.add_row(f"{ts.dataset}/{ts.split}", str(ts.rows), "reused" if ts.reused else "built", ts.key)
    console().print(table)


def register(app: typer.Typer) -> None:
    """Add `simpair pretokenize` to the top-level app."""
    app.command("pretokenize")(pretokenize)
