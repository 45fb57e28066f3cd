"""CLI commands for data contracts: `contract infer` drafts one from a raw file, `contract check` loads one.

`infer` writes plain YAML (no rich markup, no colour): with `-o PATH` to that file, atomically and only
once the draft is complete, so a failed inference leaves no file behind (a shell redirect `> x.yaml`
creates the file before simpair starts, and leaves it empty on failure); without `-o`, on stdout. It
never writes into data_contracts/ by itself, because a draft that ingest picked up unreviewed would
ingest with guessed columns.
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
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="PATH",
            help="Write the draft to PATH (only when inference succeeds; never an empty file). "
            "Default: stdout.",
        ),
    ] = None,
) -> None:
    """Propose a data contract (YAML) for FILE, with `# review:` notes to check.

    Save it with `-o data_contracts/NAME.yaml` (a `>` redirect leaves an empty file when inference fails).

    Then fix what the review notes point at and run `simpair contract check` on it.
    """
    from simpair.atomic import atomic_write_text
    from simpair.ingest.infer import infer_contract

    if out is not None and out.is_dir():
        raise typer.BadParameter(
            f"{out} is a folder; give a file path such as {out / 'NAME.yaml'}", param_hint="-o"
        )
    if out is not None and not out.parent.is_dir():
        raise typer.BadParameter(f"folder {out.parent} does not exist", param_hint="-o")
    text = infer_contract(file, dataset=dataset, sample_rows=sample_rows).to_yaml()
    if out is None:
        print(text, end="")
        return
    atomic_write_text(out, text)
    typer.echo(f"wrote {out}: read its review notes, then run simpair contract check {out}", err=True)


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
            typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
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
