"""The `simpair` command line: one typer app, each stage registers its own commands."""

from __future__ import annotations

import typer

from simpair.cli import ensemble_cmd, ingest_cmd, registry_cmd, score_cmd, train_cmd

app = typer.Typer(
    name="simpair",
    help="Semantic similarity of text pairs: ingest, pre-tokenize, train, evaluate, register, score.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Semantic similarity of text pairs: ingest, pre-tokenize, train, evaluate, register, score."""


for module in (ingest_cmd, train_cmd, ensemble_cmd, registry_cmd, score_cmd):
    module.register(app)
