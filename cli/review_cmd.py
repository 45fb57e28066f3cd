"""CLI command group `simpair review`: `simpair review import FILE` brings reviewers' labels back.

The work is `simpair.review.imports.import_reviews`; this module parses, calls it and prints where
every record of the file went (kept as a review, per queue; rejected or quarantined, per reason), the
dataset version made and what the leakage report says of the reviews. The queue itself is written by
every scoring run whose nightly profile has a `review:` block (docs/review.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from simpair.cli.common import HomeOption, JsonOutOption, StrictOption, Task, report_console, write_json
from simpair.cli.failures import fail, finish

review_app = typer.Typer(
    name="review",
    help="The review loop: import reviewers' labels of the queued pairs into the reviews dataset.",
    no_args_is_help=True,
)


def import_file(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="A Label Studio JSON export, or a CSV/TSV/Parquet file with pair_id and label columns "
            "(and optionally reviewer).",
        ),
    ],
    queue: Annotated[
        Path | None,
        typer.Option(
            "--queue",
            metavar="DIR",
            help="The exported queue the pair ids come from: a scoring output, its _review/ folder, one "
            "run's queue folder or queue.parquet. Needed for CSV/Parquet; for a Label Studio export it "
            "checks the ids against the queue (without it, against the tasks' own texts).",
        ),
    ] = None,
    task: Annotated[
        Task | None,
        typer.Option(
            "--task",
            help="paraphrase (yes/no labels: the reviews dataset) or sts (0-5 ratings: reviews-sts). "
            "Default: sts when an answer is a number other than 0 or 1, else paraphrase.",
        ),
    ] = None,
    contracts: Annotated[
        Path | None,
        typer.Option(help="Folder holding reviews.yaml / reviews-sts.yaml. Default: the shipped contracts."),
    ] = None,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
    strict: StrictOption = False,
) -> None:
    """Import one file of reviews into the versioned reviews dataset; every record is kept or quarantined."""
    import polars as pl

    from simpair.review.imports import ReviewImportError, import_reviews

    out = report_console(json_out)
    try:
        report = import_reviews(file, home, queue, task.value if task else None, contracts)  # type: ignore[arg-type]
    except (ReviewImportError, RuntimeError, OSError, ValueError, pl.exceptions.PolarsError) as exc:
        fail(str(exc), exc)  # a damaged queue or export file: one line, the traceback with --debug
    out.print(escape(report.headline()), soft_wrap=True)
    if report.rejected_path:
        out.print(escape(f"rejected records with their reasons: {report.rejected_path}"), soft_wrap=True)
    if report.quarantined:
        out.print(escape(f"quarantined by the contract: see the {report.dataset} quarantine"), soft_wrap=True)
    if report.dataset_rows:
        rows = ", ".join(f"{split} {n}" for split, n in report.dataset_rows.items())
        out.print(escape(f"{report.dataset} now holds: {rows}"), soft_wrap=True)
    if report.leakage:
        said = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in report.leakage.items())
        out.print(escape(f"leakage: {said}"), soft_wrap=True)
    elif report.leakage_error:
        out.print(escape(f"leakage report failed: {report.leakage_error}"), soft_wrap=True)
    write_json({**report.model_dump(), "balanced": report.balanced}, json_out)
    lost = sum(report.rejected.values()) + sum(report.quarantined.values())
    finish(strict, lost, f"{lost} of {report.records} records rejected or quarantined")


def register(app: typer.Typer) -> None:
    """Add the `review` command group (`review import`) to the top-level app."""
    review_app.command("import")(import_file)
    app.add_typer(review_app)
