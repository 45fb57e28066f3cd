"""CLI commands for the score stage: `simpair score` and `simpair make-sample-inbox`.

Prefect (and prefect-dask) are imported only inside the command that needs them, so `--help` and
`--no-prefect` runs stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    ModelOption,
    ModelTaskOption,
    NoPrefectOption,
    StrictOption,
    Task,
    champion_of,
    check_model_first,
    json_owns_stdout,
    report_console,
    usage_checked,
    write_json,
)
from simpair.cli.failures import finish, job_refusals, quiet_prefect_console
from simpair.cli.store_options import FORWARD_PASS, ForwardPass, ScoreCacheOption, forward_pass_options
from simpair.defaults import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK_ROWS, DEFAULT_EMBEDDING_MEMORY_MB

if TYPE_CHECKING:
    from rich.console import Console

    from simpair.scoring.summary import ScoreSummary


def summary_totals(summary: ScoreSummary) -> list[str]:
    """The run's totals, one line each: files and rows, then the embedding store and re-score if used."""
    from simpair.scoring.summary import monitor_line, precision_note, store_note

    lines = [
        f"files: {summary.files_scored} scored ({summary.files_rescored} again with this version), "
        f"{summary.files_skipped} skipped, "
        f"{summary.files_quarantined} quarantined | rows: {summary.rows_scored} scored, "
        f"{summary.rows_rejected} rejected, {summary.rows_truncated} truncated | "
        f"{summary.pairs_per_s} pairs/s | precision {summary.precision}: {precision_note(summary)}"
    ]
    if store_note(summary):
        lines.append(f"embedding store: {store_note(summary)}")
    if summary.rescore:
        lines.append(f"re-score: {summary.rescore}")
    if summary.monitor_note:
        lines.append(f"monitor: {monitor_line(summary)}")
    return lines


def summary_table(summary: ScoreSummary) -> Table:
    """One line per inbox file: its status and detail."""
    table = Table()
    table.add_column("file")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for item in summary.files:
        table.add_row(item["file"], item["status"], str(item["detail"] or ""))
    return table


def print_summary(console: Console, summary: ScoreSummary) -> None:
    """The title line, the per-file table, then the totals as plain lines.

    The totals were the table's caption, which rich wraps to the table's width: piped, `| rows:` then
    ended one line and `6 scored` began the next. As lines of their own they wrap only on a terminal
    narrower than they are, and never on a pipe (`console()` is 10,000 columns wide there).
    """
    title = (
        f"scoring run {summary.run_id} with {summary.model_name}/{summary.model_version} "
        f"in {summary.precision}"
    )
    console.print(title, markup=False, highlight=False)
    console.print(summary_table(summary))
    for line in summary_totals(summary):
        console.print(line, markup=False, highlight=False)


def print_alarms(summary: ScoreSummary) -> None:
    """One line per drift or health alarm of the run's monitor, on stderr (`simpair.nightly.report`):
    what a cron mail or a log shows; a deployed run also sends them (docs/nightly.md)."""
    from simpair.nightly.scored_run import ScoredRun

    for line in ScoredRun.from_summary(summary.to_dict()).alarm_lines():
        typer.echo(line, err=True)


@forward_pass_options(cache=ScoreCacheOption, memory_mb=DEFAULT_EMBEDDING_MEMORY_MB)
def score(
    inbox: Annotated[
        str, typer.Option(help="Folder or fsspec URL (s3://..., file://...) of Parquet batches.")
    ],
    out: Annotated[Path, typer.Option(help="Output folder: date=YYYY-MM-DD/ outputs, _rejects/, _ledger/.")],
    model: ModelOption = None,
    task: ModelTaskOption = Task.paraphrase,
    home: HomeOption = None,
    chunk_rows: Annotated[
        int, typer.Option(min=1, help="Rows per chunk (the unit of resume and fan-out).")
    ] = (DEFAULT_CHUNK_ROWS),
    batch_size: Annotated[int, typer.Option(min=1, help="Pairs per forward pass.")] = DEFAULT_BATCH_SIZE,
    threads: Annotated[
        int | None,
        typer.Option(min=1, help="Threads per worker (ONNX Runtime: batches at once). Default: CPUs/workers"),
    ] = None,
    forward: ForwardPass = FORWARD_PASS,
    rescore: Annotated[
        bool,
        typer.Option(
            help="Also score batches that another model version already scored, with this run's "
            "pinned version, into _rescored/<model>/<version>/ (their other outputs stay). Each "
            "version scores a batch once: a second --rescore with the same version skips it."
        ),
    ] = False,
    rescore_days: Annotated[
        int | None,
        typer.Option(min=0, help="With --rescore: only batches first claimed at most N days ago."),
    ] = None,
    wait: Annotated[
        float,
        typer.Option(min=0, help="Seconds to wait if another run holds the output; 0 exits at once."),
    ] = 0.0,
    dask_address: Annotated[
        str | None, typer.Option(help="Run chunks on an existing Dask scheduler.")
    ] = None,
    local_cluster: Annotated[
        int | None, typer.Option(min=1, help="Run chunks on a Dask LocalCluster of N worker processes.")
    ] = None,
    monitor: Annotated[
        bool,
        typer.Option(
            help="Profile the scored traffic and check it for drift against the model version's reference "
            "and its last runs: <out>/_monitor/<model>/<version>/<run>/ (docs/scoring.md, Monitoring)."
        ),
    ] = True,
    no_prefect: NoPrefectOption = False,
    json_out: JsonOutOption = None,
    strict: StrictOption = False,
) -> None:
    """Score every new batch in the inbox exactly once with one pinned model (once per model
    version: --rescore scores batches another version scored again).

    Rejected rows and quarantined files are kept with their reasons; with --strict they make the
    exit code 3.
    """
    from simpair import settings
    from simpair.scoring.options import ScoringOptions

    console = report_console(json_out)
    model = model or champion_of(task)
    if no_prefect and (dask_address or local_cluster):
        raise typer.BadParameter("--dask-address/--local-cluster need the Prefect flow (drop --no-prefect)")
    options = usage_checked(
        ScoringOptions, model=model, home=home, chunk_rows=chunk_rows, batch_size=batch_size,
        threads=threads, lock_wait=wait, rescore=rescore, rescore_days=rescore_days, **forward.fields(),
        monitor={"enabled": monitor},
    )  # fmt: skip
    check_model_first(model, settings.home_dir(home), flow=not no_prefect)
    from simpair.runtime.graph_cache import follow_home

    # compiled graphs under this home, even for a model given as a local folder
    with job_refusals(), follow_home(home):
        if no_prefect:
            from simpair.scoring import score_inbox

            summary = score_inbox(inbox, out, options=options)
        else:
            from simpair.flows.launch import score as run_flow

            quiet_prefect_console()

            summary = run_flow(
                inbox, out, options=options, dask_address=dask_address, local_cluster=local_cluster
            )
    print_summary(console, summary)
    print_alarms(summary)
    write_json(summary.to_dict(), json_out)
    rejected = f"{summary.rows_rejected} rows rejected, {summary.files_quarantined} files quarantined"
    finish(strict, summary.rows_rejected + summary.files_quarantined, rejected)


def make_sample_inbox(
    inbox: Annotated[Path, typer.Option(help="Folder to write the sample batches into.")],
    home: HomeOption = None,
    dataset: Annotated[
        list[str] | None, typer.Option(help="Datasets to take (repeatable). Default: all.")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many pairs per batch.")] = None,
) -> None:
    """Build an inbox from the held-out test pairs of ingested datasets, labels dropped."""
    from simpair.scoring.sample import make_sample_inbox as build
    from simpair.settings import home_dir

    for path in build(home_dir(home), inbox, dataset, limit):
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add `simpair score` and `simpair make-sample-inbox` to the top-level app."""
    app.command("score")(json_owns_stdout(score))
    app.command("make-sample-inbox")(make_sample_inbox)
