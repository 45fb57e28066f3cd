"""The `simpair` command line: one typer app; `cli/<command>_cmd.py` holds each command (or family).

The command line sets its own quiet defaults, before anything imports Prefect or Hugging Face, so it
behaves the same with or without the Makefile: no Hub downloads, no tokenizer fork warnings, no
telemetry from Prefect's temporary server. A value already in the environment wins.
"""

from __future__ import annotations

import os

QUIET_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}
for _name, _value in QUIET_DEFAULTS.items():
    os.environ.setdefault(_name, _value)

from typing import Annotated  # noqa: E402

import typer  # noqa: E402

from simpair.cli import (  # noqa: E402
    contract_cmd,
    evaluate_cmd,
    info_cmd,
    ingest_cmd,
    mine_cmd,
    models_cmd,
    monitor_cmd,
    nightly_cmd,
    predict_cmd,
    pretokenize_cmd,
    review_cmd,
    score_cmd,
    stack_cmd,
    train_cmd,
)
from simpair.cli.failures import SimpairTyper, set_debug  # noqa: E402

app = SimpairTyper(
    name="simpair",
    help="Semantic similarity of text pairs: ingest, pre-tokenize, train, evaluate, register, score.",
    no_args_is_help=True,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    """`simpair --version`: the installed version, then exit before any command runs."""
    if value:
        typer.echo(f"simpair {info_cmd.simpair_version()}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed version and exit.",
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            envvar="SIMPAIR_DEBUG",
            help="On failure print the full traceback, not only the error line (also SIMPAIR_DEBUG=1).",
        ),
    ] = False,
) -> None:
    """Semantic similarity of text pairs: ingest, pre-tokenize, train, evaluate, register, score."""
    set_debug(debug)


# The order here is the order of `simpair --help` (command groups such as `contract` and `models` last).
for module in (
    ingest_cmd,
    contract_cmd,
    pretokenize_cmd,
    train_cmd,
    evaluate_cmd,
    predict_cmd,
    stack_cmd,  # cascade, stack, soup
    models_cmd,
    nightly_cmd,
    score_cmd,
    monitor_cmd,
    review_cmd,  # review import
    mine_cmd,  # encode, mine
    info_cmd,
):
    module.register(app)
