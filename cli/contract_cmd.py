"""CLI commands for data contracts: `contract infer` drafts one from a raw file, `contract check` loads one.

`infer` prints plain YAML on stdout (no rich markup, no colour) so `simpair contract infer x.csv >
data_contracts/x.yaml` gives a file to edit; it never writes a contract itself, because a draft that
ingest picked up unreviewed would ingest with guessed columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

contract_app = typer.Typer(
    name="contract",
    help="Data contracts: draft one from a raw file (infer), validate one (check).",
    no_args_is_help=True,
)


@contract_app.command("infer")
def infer(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="Raw file: a local path or an fsspec URL (s3://...); .gz/.zst are read."
        ),
    ],
    dataset: Annotated[
        str | None, typer.Option(help="Dataset name. Default: a slug of the file name.")
    ] = None,
    sample_rows: Annotated[
        int, typer.Option("--sample-rows", min=2, help="Infer from this many first records.")
    ] = 5000,
) -> None:
    """Print a proposed data contract (YAML) for FILE, with `# review:` notes; nothing is written.

    Redirect it into data_contracts/NAME.yaml, fix what the notes point at, then `simpair contract check` it.
    """
    from simpair.ingest.infer import infer_contract

    print(infer_contract(file, dataset=dataset, sample_rows=sample_rows).to_yaml(), end="")


@contract_app.command("check")
def check(
    contracts: Annotated[
        list[Path], typer.Argument(metavar="CONTRACT.yaml", help="Contract files to validate.")
    ],
) -> None:
    """Load each contract as ingest would; exit 1 if any is invalid (the error names file and field)."""
    from simpair.contracts import ContractError, load_contract

    failed = False
    for path in contracts:
        try:
            contract = load_contract(path)
        except ContractError as exc:
            typer.echo(str(exc), err=True)
            failed = True
            continue
        splits = ", ".join(
            name if role == name else f"{name} ({role})" for name, role in contract.splits().items()
        )
        by_column = ""
        if contract.split_column is not None:
            by_column = f" (rows by column {contract.split_column.column!r})"
        print(f"ok: dataset {contract.dataset}, splits {splits}{by_column} ({path})")
    if failed:
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Add the `contract` command group to the top-level app."""
    app.add_typer(contract_app)
