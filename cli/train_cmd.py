"""CLI commands for one model: pretokenize, train, evaluate, predict.

Each command parses its options, calls the domain (`simpair.training`, `simpair.evaluate`,
`simpair.evaluate_file`, `simpair.predictors`) and prints. Heavy imports (torch, transformers) happen
inside the commands, so `simpair --help` stays fast.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from simpair.cli.common import (
    HomeOption,
    load_config,
    parse_split_option,
    print_eval,
    print_file_eval,
    print_transfer,
    resolve_model_option,
)


class LabelKindOption(StrEnum):
    """The --label-kind choices (typer shows them in --help and rejects others)."""

    graded = "graded"
    binary = "binary"


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""

    @app.command("pretokenize")
    def pretokenize_cmd(
        config: Annotated[Path, typer.Option(help="Training config (YAML): tokenize every split it reads.")],
        home: HomeOption = None,
    ) -> None:
        """Tokenize the splits a training config needs into <home>/tokens/ (reused when already there)."""
        from simpair import settings
        from simpair.training.pretokenize import pretokenize_config

        cfg = load_config(config, None)
        table = Table("dataset/split", "rows", "cache", "key")
        for ts in pretokenize_config(cfg, settings.home_dir(home)):
            table.add_row(
                f"{ts.dataset}/{ts.split}", str(ts.rows), "reused" if ts.reused else "built", ts.key
            )
        Console().print(table)

    @app.command("train")
    def train_cmd(
        config: Annotated[Path, typer.Option(help="Training config (YAML), e.g. configs/msrp-cross.yaml.")],
        home: HomeOption = None,
        set_: Annotated[
            list[str] | None,
            typer.Option("--set", help="Override a config field: --set epochs=1 --set learning_rate=5e-5."),
        ] = None,
        evaluate: Annotated[
            bool, typer.Option(help="Evaluate on the config's evaluate_on splits after training.")
        ] = True,
    ) -> None:
        """Train a cross- or bi-encoder as the config says; prints the model directory and dev metrics.

        Several GPUs (or CPU processes): torchrun --nproc-per-node N -m simpair.training --config X.
        """
        from simpair import settings
        from simpair.training import train

        cfg = load_config(config, set_)
        home_path = settings.home_dir(home)
        result = train(cfg, home_path)
        console = Console()
        console.print(f"model: {result.model_dir}", soft_wrap=True)
        console.print_json(json.dumps(result.metrics.get("dev", {})))
        if evaluate and cfg.evaluate_on:
            from simpair.evaluate import evaluate_model

            ev = evaluate_model(result.model_dir, home_path, [(r.dataset, r.split) for r in cfg.evaluate_on])
            print_eval(console, ev)

    @app.command("evaluate")
    def evaluate_cmd(
        model: Annotated[
            str | None, typer.Option(help="Model directory or registry ref. Default: newest.")
        ] = None,
        split: Annotated[
            list[str] | None,
            typer.Option(help="DATASET/SPLIT to evaluate on (repeatable). Default: test splits."),
        ] = None,
        home: HomeOption = None,
        exclude_leaked: Annotated[
            bool,
            typer.Option(
                help="Exclude pairs the leakage report finds in the model's training data (with --file: "
                "the file's pairs that sit in the model's training data ingested in this home)."
            ),
        ] = True,
        out: Annotated[
            Path | None, typer.Option(help="Output folder. Default: <home>/evaluations/<model>-<time>.")
        ] = None,
        group_pattern: Annotated[
            str | None,
            typer.Option(
                help="Also report metrics per group of pairs: a regular expression over pair ids whose "
                "first capture group names the group, e.g. '^(.+?)-\\d{4}' for STS-B genres."
            ),
        ] = None,
        file: Annotated[
            Path | None,
            typer.Option(
                "--file",
                help="Evaluate on your own labelled pairs instead of ingested splits: a Parquet, CSV or TSV "
                "file with text_a, text_b and a label column; the untrained backbone is scored beside it.",
            ),
        ] = None,
        label_kind: Annotated[
            LabelKindOption | None,
            typer.Option(
                help="With --file: 0/1 labels (binary) or similarity grades (graded). Default: the "
                "model's task (paraphrase: binary, sts: graded)."
            ),
        ] = None,
        score_range: Annotated[
            tuple[float, float] | None,
            typer.Option(
                "--range",
                metavar="MIN MAX",
                help="With --file and graded labels: the scale they are written on (e.g. 0 5); rescaled to "
                "0-1, rows outside dropped. Default: 0 1.",
            ),
        ] = None,
        label_column: Annotated[
            str | None,
            typer.Option(help="With --file: the label column. Default: label (binary), score (graded)."),
        ] = None,
        zero_shot: Annotated[
            bool,
            typer.Option(help="With --file: also score the untrained backbone (zero-shot) for comparison."),
        ] = True,
        transfer: Annotated[
            bool,
            typer.Option(
                "--transfer",
                help="The model beside its untrained backbone on its test splits and on the other task's "
                "test split (STS model: ROC-AUC on msrp/test; paraphrase model: Spearman on stsb/test); "
                "recorded as an MLflow run.",
            ),
        ] = False,
    ) -> None:
        """Metrics, PNG plots and a markdown report for a saved model (threshold as chosen on dev).

        With --file: on your own labelled pairs, the model beside its untrained backbone (zero-shot).
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
                name
                for name, given in (("--split", bool(split)), ("--group-pattern", group_pattern))
                if given
            ]
            if clash:
                raise typer.BadParameter(
                    f"--file evaluates your own pairs; it cannot be combined with {', '.join(clash)}",
                    param_hint="--file",
                )
            _evaluate_file(
                model, file, label_kind, score_range, label_column, zero_shot, exclude_leaked, home, out
            )
            return
        stray = [name for name, given in file_only.items() if given]
        if stray:
            raise typer.BadParameter(f"{', '.join(stray)} only apply with --file PATH", param_hint=stray[0])
        from simpair.evaluate import evaluate_model

        home_path = settings.home_dir(home)
        model_dir = resolve_model_option(model, home_path)
        if transfer:
            if split or group_pattern:
                raise typer.BadParameter("--transfer picks its own splits", param_hint="--transfer")
            from simpair.transfer import log_transfer, transfer_report

            report = transfer_report(model_dir, home_path, out)
            run_id = log_transfer(report, home_path)
            print_transfer(Console(), report, run_id)
            return
        splits = [parse_split_option(s) for s in split] if split else None
        try:
            ev = evaluate_model(
                model_dir,
                home_path,
                splits,
                exclude_leaked=exclude_leaked,
                out_dir=out,
                group_pattern=group_pattern,
            )
        except ValueError as exc:
            if group_pattern is None or "group pattern" not in str(exc):
                raise
            raise typer.BadParameter(str(exc), param_hint="--group-pattern") from exc
        print_eval(Console(), ev)

    def _evaluate_file(
        model: str | None,
        file: Path,
        label_kind: LabelKindOption | None,
        score_range: tuple[float, float] | None,
        label_column: str | None,
        zero_shot: bool,
        exclude_leaked: bool,
        home: Path | None,
        out: Path | None,
    ) -> None:
        """`evaluate --file`: the domain's errors about the file become one usage line naming the option."""
        from simpair import settings
        from simpair.evaluate_file import FileEvalError, evaluate_file
        from simpair.model_ref import NoModel

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
        except NoModel as exc:
            raise typer.BadParameter(str(exc), param_hint="--model") from None
        except FileEvalError as exc:
            raise typer.BadParameter(str(exc), param_hint=exc.option) from None
        print_file_eval(Console(), result)

    @app.command("predict")
    def predict_cmd(
        text_a: Annotated[str, typer.Argument(help="First sentence.")],
        text_b: Annotated[str, typer.Argument(help="Second sentence.")],
        model: Annotated[
            str | None, typer.Option(help="Model directory or registry ref. Default: newest.")
        ] = None,
        home: HomeOption = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Score one pair: score (0-1), and for paraphrase models probability and label."""
        from simpair import settings
        from simpair.predictors import load_predictor

        model_dir = resolve_model_option(model, settings.home_dir(home))
        predictor = load_predictor(model_dir)
        out = predictor.predict([text_a], [text_b])
        result: dict[str, Any] = {k: v[0].item() for k, v in out.items()}
        result["truncated"] = bool(predictor.truncated([text_a], [text_b])[0])
        result["model"] = str(model_dir)
        if as_json:
            typer.echo(json.dumps(result))
            return
        names = {"stacked": "stacked ensemble", "cascade": "bi -> cross cascade"}
        kind = names.get(predictor.kind, f"{predictor.kind}-encoder")
        table = Table("field", "value", title=f"{kind}, task {predictor.task}")
        for key, value in result.items():
            table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
        Console().print(table)
