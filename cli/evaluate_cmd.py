"""CLI command `simpair evaluate`: metrics, plots and a report for a saved model.

Three modes share one command: ingested splits (default), your own labelled file (`--file`), and
in-domain beside cross-task (`--transfer`). The command only parses options, calls the domain
(`simpair.evaluation`: `splits`, `file`, `transfer`) and prints; heavy imports happen
inside it, so `simpair --help` stays fast.
"""

from __future__ import annotations

from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    ModelOption,
    ModelTaskOption,
    StrictOption,
    Task,
    champion_of,
    json_owns_stdout,
    parse_split_option,
    print_eval,
    print_file_eval,
    print_transfer,
    report_console,
    require_registered,
    resolve_model_option,
    write_json,
)
from simpair.cli.failures import fail, finish

if TYPE_CHECKING:
    from simpair.evaluation.file.run import FileEvalResult


class LabelKindOption(StrEnum):
    """The --label-kind choices (typer shows them in --help and rejects others)."""

    graded = "graded"
    binary = "binary"


# The command's own options, named once here so the signature reads as the list of what it takes.
SplitsOption = Annotated[
    list[str] | None,
    typer.Option(help="DATASET/SPLIT to evaluate on (repeatable). Default: test splits."),
]
ExcludeLeakedOption = Annotated[
    bool,
    typer.Option(
        help="Exclude pairs the leakage report finds in the model's training data (with --file: "
        "the file's pairs that sit in the model's training data ingested in this home)."
    ),
]
EvalOutOption = Annotated[
    Path | None, typer.Option(help="Output folder. Default: <home>/evaluations/<model>-<time>.")
]
GroupPatternOption = Annotated[
    str | None,
    typer.Option(
        help="Also report metrics per group of pairs: a regular expression over pair ids whose "
        "first capture group names the group, e.g. '^(.+?)-\\d{4}' for STS-B genres."
    ),
]
FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file",
        help="Evaluate on your own labelled pairs instead of ingested splits: a Parquet, CSV or TSV "
        "file with text_a, text_b and a label column; the untrained backbone is scored beside it.",
    ),
]
LabelKindChoice = Annotated[
    LabelKindOption | None,
    typer.Option(
        help="With --file: 0/1 labels (binary) or similarity grades (graded). Default: the "
        "model's task (paraphrase: binary, sts: graded)."
    ),
]
ScoreRangeOption = Annotated[
    tuple[float, float] | None,
    typer.Option(
        "--range",
        metavar="MIN MAX",
        help="With --file and graded labels: the scale they are written on (e.g. 0 5); rescaled to "
        "0-1, rows outside dropped. Default: 0 1.",
    ),
]
LabelColumnOption = Annotated[
    str | None,
    typer.Option(help="With --file: the label column. Default: label (binary), score (graded)."),
]
ZeroShotOption = Annotated[
    bool,
    typer.Option(help="With --file: also score the untrained backbone (zero-shot) for comparison."),
]
TransferOption = Annotated[
    bool,
    typer.Option(
        "--transfer",
        help="The model beside its untrained backbone on its test splits and on the other task's "
        "test split (STS model: ROC-AUC on msrp/test; paraphrase model: Spearman on stsb/test); "
        "recorded as an MLflow run.",
    ),
]


def evaluate(
    model: ModelOption = None,
    task: ModelTaskOption = Task.paraphrase,
    split: SplitsOption = None,
    home: HomeOption = None,
    exclude_leaked: ExcludeLeakedOption = True,
    out: EvalOutOption = None,
    group_pattern: GroupPatternOption = None,
    file: FileOption = None,
    label_kind: LabelKindChoice = None,
    score_range: ScoreRangeOption = None,
    label_column: LabelColumnOption = None,
    zero_shot: ZeroShotOption = True,
    transfer: TransferOption = False,
    json_out: JsonOutOption = None,
    strict: StrictOption = False,
) -> None:
    """Metrics, PNG plots and a markdown report for a saved model (threshold as chosen on dev).

    With --file: on your own labelled pairs, the model beside its untrained backbone (zero-shot);
    rows it cannot use are dropped with their reasons (with --strict they make the exit code 3).
    With --transfer: in its domain and off it, beside its untrained backbone.
    """
    from simpair import settings

    file_only = {
        "--label-kind": label_kind is not None,
        "--range": score_range is not None,
        "--label-column": label_column is not None,
        "--no-zero-shot": not zero_shot,
    }
    if file is not None:
        clash = [
            name for name, given in (("--split", bool(split)), ("--group-pattern", group_pattern)) if given
        ]
        if clash:
            raise typer.BadParameter(
                f"--file evaluates your own pairs; it cannot be combined with {', '.join(clash)}",
                param_hint="--file",
            )
        result = _evaluate_file(
            model or champion_of(task), file, label_kind, score_range, label_column, zero_shot,
            exclude_leaked, home, out,
        )  # fmt: skip
        _print_file_result(result, json_out, strict)
        return
    stray = [name for name, given in file_only.items() if given]
    if stray:
        raise typer.BadParameter(f"{', '.join(stray)} only apply with --file PATH", param_hint=stray[0])
    home_path = settings.home_dir(home)
    model_dir = resolve_model_option(model, home_path, task)  # before torch: a missing model fails at once
    if transfer:
        if split or group_pattern:
            raise typer.BadParameter("--transfer picks its own splits", param_hint="--transfer")
        _evaluate_transfer(model_dir, home_path, out, json_out)
        return
    _evaluate_splits(model_dir, home_path, split, exclude_leaked, out, group_pattern, json_out)


def _print_file_result(result: FileEvalResult, json_out: Path | None, strict: bool) -> None:
    """Print the --file result, write its JSON, and with --strict exit 3 if unusable rows were dropped."""
    print_file_eval(report_console(json_out), result)
    write_json(asdict(result), json_out)
    # pairs in the model's training data are left out by design, not for being unusable
    dropped = sum(n for why, n in result.metrics["dropped"].items() if why != "in_training_data")
    finish(strict, dropped, f"{dropped} rows dropped as unusable (dropped.parquet)")


def _evaluate_transfer(model_dir: Path, home: Path, out: Path | None, json_out: Path | None) -> None:
    """`evaluate --transfer`: in-domain beside cross-task, recorded as an MLflow run, then printed."""
    from simpair.selection.transfer import log_transfer, transfer_report

    report = transfer_report(model_dir, home, out)
    run_id = log_transfer(report, home)
    print_transfer(report_console(json_out), report, run_id)
    write_json(asdict(report) | {"mlflow_run_id": run_id}, json_out)


def _evaluate_splits(
    model_dir: Path,
    home: Path,
    split: list[str] | None,
    exclude_leaked: bool,
    out: Path | None,
    group_pattern: str | None,
    json_out: Path | None,
) -> None:
    """`evaluate` on ingested splits: a bad --group-pattern becomes a usage error naming the option."""
    from simpair.evaluation.splits import evaluate_model

    splits = [parse_split_option(s) for s in split] if split else None
    try:
        ev = evaluate_model(
            model_dir, home, splits, exclude_leaked=exclude_leaked, out_dir=out, group_pattern=group_pattern
        )
    except ValueError as exc:
        if group_pattern is None or "group pattern" not in str(exc):
            raise
        raise typer.BadParameter(str(exc), param_hint="--group-pattern") from exc
    print_eval(report_console(json_out), ev)
    write_json(asdict(ev), json_out)


def _evaluate_file(
    model: str,
    file: Path,
    label_kind: LabelKindOption | None,
    score_range: tuple[float, float] | None,
    label_column: str | None,
    zero_shot: bool,
    exclude_leaked: bool,
    home: Path | None,
    out: Path | None,
) -> FileEvalResult:
    """`evaluate --file`: the domain's errors about the file become one usage line naming the option."""
    from simpair import settings

    require_registered(model, settings.home_dir(home))  # before torch: a fresh home fails at once
    from simpair.evaluation.file import FileEvalError, evaluate_file

    try:  # the spec itself goes down, so the report names a registry model by name and version
        result = evaluate_file(
            model,
            file,
            label_kind.value if label_kind else None,
            label_column=label_column,
            score_range=score_range,
            home=settings.home_dir(home),
            out_dir=out,
            zero_shot=zero_shot,
            exclude_trained=exclude_leaked,
        )
    except FileEvalError as exc:
        raise typer.BadParameter(str(exc), param_hint=exc.option) from None
    except LookupError as exc:  # NoModel, or the registry's ModelNotFound
        fail(str(exc), exc)
    return result


def register(app: typer.Typer) -> None:
    """Add the `evaluate` command to the top-level app."""
    app.command("evaluate")(json_owns_stdout(evaluate))
