"""Options and helpers every `simpair` command module shares: home, jobs, --set, splits, models, output.

An option that two commands mean the same way (`--home`, `--model`, `--task`, `--no-prefect`,
`--json`, `--strict` ...) is declared here once, so it is spelled and explained the same everywhere.
The helpers turn the domain's `ValueError` into typer's usage errors, so a bad value prints one line
naming the option, resolve a command's model by one rule (the task's champion unless `--model`),
and print the same way everywhere: `console()` for what a person reads (never wrapped when piped),
`write_json()` for what a program reads.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer import rich_utils

from simpair.cli.failures import fail

if TYPE_CHECKING:
    from pydantic import ValidationError

T = TypeVar("T")

HomeOption = Annotated[
    Path | None,
    typer.Option(
        help="Pipeline home (data, models, registry). Default: $SIMPAIR_HOME, else .simpair/ in a checkout, "
        "else the user data directory (~/.local/share/simpair on Linux)."
    ),
]
SourcesOption = Annotated[
    str | None,
    typer.Option(
        help="Folder or fsspec URL (s3://bucket/raw) with the raw files. "
        "Default: $SIMPAIR_SOURCES, else ../shared/data beside a checkout; "
        "an installed simpair has no default."
    ),
]


class Task(StrEnum):
    """The two tasks, each with its registered model and its champion (`simpair-<task>@champion`)."""

    paraphrase = "paraphrase"
    sts = "sts"


def champion_of(task: str) -> str:
    """The default model of a command: its task's champion in the registry."""
    return f"simpair-{task}@champion"


ModelOption = Annotated[
    str | None,
    typer.Option(
        help="A model folder (simpair, sentence-transformers or a Hugging Face classifier), a hub id in the "
        "local cache, or a registry reference (name@alias, name/version). "
        "Default: the --task's champion, simpair-paraphrase@champion (simpair-sts@champion with --task sts)."
    ),
]
ModelTaskOption = Annotated[
    Task, typer.Option("--task", help="Without --model: whose champion to use (simpair-<task>@champion).")
]
BiEncoderOption = Annotated[
    str,
    typer.Option(
        help="Bi-encoder: a model folder (simpair or sentence-transformers), a hub id in the local cache, "
        "or a registry reference (name@alias, name/version). "
        "Default: the sentence-similarity (sts) task's champion."
    ),
]
ProfileOption = Annotated[
    str, typer.Option("--profile", help="Nightly profile: default | smoke | path to YAML.")
]
NoPrefectOption = Annotated[
    bool,
    typer.Option(
        "--no-prefect", help="Run in this process without Prefect: no flow run, no server, no artifact."
    ),
]


def json_target(value: str | None) -> str | None:
    """`--json`'s check, made when the options are read: a PATH that cannot be written is a usage
    error (exit 2) before the command ingests, trains or scores anything, not a FileNotFoundError
    after the work is done. `-` is stdout; otherwise PATH's folder must exist and PATH be no folder."""
    if value is None or value == "-":
        return value
    path = Path(value)
    if path.is_dir():
        raise typer.BadParameter(f"{value} is a folder; give a file path, or - for stdout")
    if not path.parent.is_dir():
        raise typer.BadParameter(f"no folder {path.parent} to write {path.name} in")
    return value


JsonOutOption = Annotated[
    str | None,
    typer.Option(
        "--json",
        metavar="PATH|-",
        callback=json_target,
        help="Write the result as JSON to PATH, or to stdout with -.",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Exit 3 (not 0) when the run finished but quarantined or rejected rows or files.",
    ),
]
SentenceColumnOption = Annotated[str, typer.Option(help="Column holding the sentences.")]
IdColumnOption = Annotated[
    str | None, typer.Option(help="Column identifying each row (default: the row number).")
]

# Width of a console that is not a terminal (a pipe, a file, a log): wide enough that rich never
# wraps a line or folds a table cell, so a path or a sentence is copied whole.
PIPED_WIDTH = 10_000
# `--help` into a pipe: wide enough for every default and option name, narrow enough to read.
PIPED_HELP_WIDTH = 200


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


if rich_utils.MAX_WIDTH is None and "TERMINAL_WIDTH" not in os.environ and not _is_terminal(sys.stdout):
    rich_utils.MAX_WIDTH = PIPED_HELP_WIDTH  # typer reads it each time it prints help


def console(stderr: bool = False) -> Console:
    """The console a command prints what a person reads on: the terminal's width on a terminal, and
    never wrapped or folded when piped (`PIPED_WIDTH`), so `simpair models | grep` finds whole lines."""
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return probe
    return Console(stderr=stderr, width=PIPED_WIDTH)


def report_console(json_target: str | None) -> Console:
    """Where a command's human summary goes: stdout, or stderr when `--json -` owns stdout."""
    return console(stderr=json_target == "-")


_json_streams: list[IO[str]] = []  # the real stdout while `stdout_kept_for_json` holds it


@contextmanager
def stdout_kept_for_json(target: str | None) -> Iterator[None]:
    """With `--json -`, what the work prints (training's epoch lines, scoring notes) goes to stderr, so
    stdout holds the JSON only; `write_json` still writes to the real stdout inside the block."""
    if target != "-":
        yield
        return
    _json_streams.append(sys.stdout)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _json_streams.pop()


def json_owns_stdout(command: Callable[..., None]) -> Callable[..., None]:
    """A command whose `--json -` output must be alone on stdout: its whole run inside
    `stdout_kept_for_json` (typer reads the options from the wrapped function)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        with stdout_kept_for_json(kwargs.get("json_out")):
            command(*args, **kwargs)

    return run


def write_json(value: Any, target: str | None) -> None:
    """`--json PATH` writes `value` to PATH, `--json -` to stdout (nothing else is printed there)."""
    if target is None:
        return
    text = json.dumps(value, indent=2, default=str) + "\n"
    if target == "-":
        stream = _json_streams[-1] if _json_streams else sys.stdout
        stream.write(text)
        stream.flush()
    elif Path(target).exists() and not Path(target).is_file():  # /dev/stdout, a named pipe
        with open(target, "w", encoding="utf-8") as stream:
            stream.write(text)
    else:  # a reader never sees half a report, and a failed write leaves the old one
        from simpair.atomic import atomic_write_text

        atomic_write_text(target, text)


def print_markdown(out: Console, text: str) -> None:
    """Markdown rendered on a terminal, its source as it is when piped (headings and tables stay lines)."""
    if out.is_terminal:
        from rich.markdown import Markdown  # markdown-it: only for the commands that print markdown

        out.print(Markdown(text))
    else:
        out.print(Text(text))


def freeze_imports() -> None:
    """Leave the objects the imports made so far out of every later garbage collection (`gc.freeze`).

    A command imports polars, numpy, pyarrow and pydantic, hundreds of thousands of objects that live
    until the process ends; collections then walk only what the command itself makes. The
    interpreter's last collection at exit went from 0.16 s to 0.05 s after a 2M-row
    `simpair ingest --no-prefect` (2026-11-27).
    """
    gc.freeze()


def parse_sets(values: list[str] | None) -> dict[str, Any]:
    """`--set key=value` pairs; values are parsed as YAML (numbers, booleans, lists)."""
    from simpair.training.config import parse_overrides

    try:
        return parse_overrides(values)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def load_config(config: Path, overrides: list[str] | None) -> Any:
    from simpair.training.config import load_train_config

    changes = parse_sets(overrides)
    try:
        return load_train_config(config, changes)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc


def parse_split_option(value: str) -> tuple[str, str]:
    from simpair.training.config import parse_split

    try:
        return parse_split(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def registry_spec_name(spec: str) -> str | None:
    """The registered model a spec names (`name@alias`, `name/<number>`, `models:/...`, or a bare
    `simpair-<task>`), as the registry parses it; None for a folder, a hub id or anything else."""
    if Path(spec).expanduser().exists():
        return None
    text = spec.removeprefix("models:/").strip().strip("/")
    if "@" in text:
        return text.split("@", 1)[0]
    name, _, version = text.rpartition("/")
    if name and version.isdigit():
        return name
    return text if text in {champion_of(t).split("@")[0] for t in Task} else None


def require_registered(spec: str, home: Path) -> None:
    """Fail at once, before MLflow or Prefect starts, when `spec` names a model the registry lacks
    entirely (a fresh home); say how to get one. Anything else is left to the resolution itself."""
    from simpair import settings
    from simpair.registry_probe import registered_versions

    name = registry_spec_name(spec)
    if name is None:
        return
    uri = settings.tracking_uri(home, create=False)
    if registered_versions(uri, name) == 0:
        fail(no_model_message(spec, uri))


def check_model_first(spec: str, home: Path, *, flow: bool) -> None:
    """Before any work: a model that is not there ends the command at once (one `error:` line).

    In this process (`flow` False) a registry spec the registry lacks entirely is enough to check
    (`require_registered`): the run resolves the model first thing anyway. Before a Prefect flow, a
    folder or hub id that is no model is also refused here instead of inside a retried task; a registry
    spec is still only probed, since the flow pins its version itself.
    """
    require_registered(spec, home)
    if not flow or registry_spec_name(spec) is not None or "@" in spec:
        return
    from simpair.runtime.model_ref import resolve_model_ref

    try:
        resolve_model_ref(spec, home)
    except LookupError as exc:
        fail(str(exc), exc)


def no_model_message(spec: str, uri: str) -> str:
    """What to do when the registry holds no version of the model `spec` names."""
    task = {champion_of(t).split("@")[0]: t.value for t in Task}.get(registry_spec_name(spec) or "")
    return (
        f"no model {spec} in the registry at {uri}: train one with `simpair nightly`, or bring one "
        f"with `simpair models import DIR --task {task or 'paraphrase|sts'}`"
    )


def resolve_model_option(model: str | None, home: Path, task: str = Task.paraphrase) -> Path:
    """A model folder or a registry reference, by default the task's champion, as a local folder.

    A spec that names nothing ends the command with one `error:` line (exit 1).
    """
    from simpair.runtime.model_ref import resolve_model_ref

    spec = model or champion_of(task)
    require_registered(spec, home)
    try:
        return Path(resolve_model_ref(spec, home).local_dir)
    except LookupError as exc:  # NoModel, or the registry's ModelNotFound
        fail(str(exc), exc)


def print_eval(console: Console, ev: Any) -> None:
    """One row per evaluated split (and per group when asked), then where the report is."""
    table = Table("split", "evaluated", "leaked excluded", "metrics")
    for label, m in ev.metrics["splits"].items():
        keys = ["accuracy", "f1", "roc_auc"] if "accuracy" in m else ["spearman", "pearson", "mse"]
        table.add_row(
            label, str(m["evaluated"]), str(m["excluded_leaked"]), ", ".join(f"{k} {m[k]:.4f}" for k in keys)
        )
        for group, g in m.get("by_group", {}).items():
            values = {k: g.get(k, g.get(f"graded_{k}")) for k in keys}
            metrics = ", ".join(f"{k} {v:.4f}" for k, v in values.items() if v is not None)
            table.add_row(f"  {group}", str(g["evaluated"]), "", metrics)
    console.print(table)
    console.print(f"report: {ev.report_path}")


def print_file_eval(console: Console, ev: Any) -> None:
    """Model and zero-shot side by side, what was dropped and why, the verdict, where the report is."""
    m = ev.metrics
    zs = m["zero_shot"]
    table = Table(
        "metric",
        "model",
        "zero-shot",
        "difference",
        title=f"{m['model']} on {Path(m['file']).name}: {m['evaluated']} of {m['rows_read']} pairs",
    )

    def fmt(value: Any, signed: bool = False) -> str:
        if value is None or value != value:  # missing or NaN (undefined on this file)
            return "n/a" if not signed else ""
        return f"{value:+.4f}" if signed else f"{value:.4f}"

    keys = ["accuracy", "f1", "precision", "recall", "roc_auc"]
    if m["label_kind"] == "graded":
        keys = ["spearman", "pearson", "mse", "mae"]
    for key in keys:
        zs_value = zs["metrics"].get(key) if zs else None
        table.add_row(key, fmt(m["model_metrics"].get(key)), fmt(zs_value), fmt(m["deltas"].get(key), True))
    console.print(table)
    if zs and zs["threshold"] is None and m["label_kind"] == "binary":
        console.print("zero-shot: no threshold (no ingested training data to pick one on), ROC-AUC only")
    overlap = m["training_overlap"]
    if overlap["found"] and not overlap["excluded"]:
        console.print(
            f"{overlap['found']} pairs are in the model's training data, kept (--no-exclude-leaked)"
        )
    if overlap["not_checked"]:
        console.print(
            f"not checked against training data (not ingested here): {', '.join(overlap['not_checked'])}"
        )
    if m["dropped"]:
        reasons = ", ".join(f"{count} {why}" for why, count in m["dropped"].items())
        console.print(f"dropped {sum(m['dropped'].values())} rows: {reasons} (dropped.parquet)")
    console.print(m["verdict"])
    console.print(f"report: {ev.report_path}")


def print_transfer(console: Console, report: Any, run_id: str) -> None:
    """In-domain and cross-task figures, model beside zero-shot, and where they were recorded."""
    table = Table("split", "kind", "metric", "model", "zero-shot", "delta", "pairs")
    for r in report.rows:
        figures = [f"{r.model:.4f}", f"{r.zero_shot:.4f}", f"{r.delta:+.4f}", str(r.pairs)]
        table.add_row(r.split, r.kind, r.metric, *figures, style="red" if r.delta < 0 else None)
    console.print(table)
    if report.wise_ft:
        path = Table("alpha", f"dev {report.wise_ft['dev_metric']}", *report.wise_ft["backbone"])
        for alpha, row in sorted(report.wise_ft["by_alpha"].items(), key=lambda kv: -float(kv[0])):
            chosen = float(alpha) == float(report.wise_ft["alpha"])
            path.add_row(alpha, *(f"{v:.4f}" for v in row.values()), style="bold" if chosen else None)
        figures = [f"{v:.4f}" for v in report.wise_ft["backbone"].values()]
        path.add_row("backbone", "", *figures, style="dim")
        console.print(f"WiSE-FT path (chosen alpha {report.wise_ft['alpha']:g}):")
        console.print(path)
        console.print(f"plot: {report.out_dir}/wise_path.png")
    elif report.wise_ft_note:
        console.print(f"no WiSE-FT path: {report.wise_ft_note}")
    console.print(f"report: {report.out_dir}/transfer.md  (MLflow run {run_id})")


def usage_checked(options: Callable[..., T], **fields: Any) -> T:
    """`options(**fields)`: a command's options built into the pydantic model its job takes (the job's
    own checks), where a combination the model refuses is a usage error (exit 2, one line in the
    validators' words) raised before the model resolves or Prefect starts, not a failed run."""
    from pydantic import ValidationError

    try:
        return options(**fields)
    except ValidationError as exc:
        raise typer.BadParameter(validation_message(exc)) from None


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as the sentences our validators wrote (or pydantic's, with the field), no dump."""

    def reason(error: Any) -> str:
        message = str(error["msg"]).removeprefix("Value error, ")
        where = ".".join(str(part) for part in error.get("loc", ()))
        return f"{where}: {message}" if where else message

    return "; ".join(reason(e) for e in exc.errors())
