"""Options and helpers every `simpair` command module shares: home, jobs, --set, splits, models.

An option that two commands mean the same way (`--home`, `--model`, `--no-prefect`, `--json` ...) is
declared here once, so it is spelled and explained the same everywhere. The helpers turn the domain's
`ValueError`/`LookupError` into typer's usage errors, so a bad value prints one line naming the
option, and print evaluation tables the same way everywhere.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from pydantic import ValidationError

JobsOption = Annotated[
    int,
    typer.Option(
        min=1,
        help="With --config: train this many members at once, each in its own process with "
        "cores/jobs threads (CPU: 2 on 2 cores halves a two-member stack's wall time).",
    ),
]
BackendOption = Annotated[
    str,
    typer.Option(help="Forward pass: auto (ONNX Runtime on CPU when installed, else torch), torch, or onnx."),
]
PrecisionOption = Annotated[
    str,
    typer.Option(
        help="auto (default: the fastest of fp32, bf16 and int8 that keeps the model's dev decisions: at "
        "most 0.5% of dev labels flip, dev metric within 0.002; measured once per model and cached, see "
        "docs/scoring.md), fp32 (the fp32 reference), bf16 (where bf16 is native; not with --backend "
        "onnx) or int8 (quantized ONNX Runtime graph; refused unless it passes the int8 parity guard on "
        "the model's dev split, see `simpair models int8-check`; not with --backend torch).",
    ),
]
EXIT_INT8_REFUSED = 5  # an explicit --precision int8 the parity guard refused (as `simpair score`)
HomeOption = Annotated[
    Path | None,
    typer.Option(
        help="Pipeline home (data, models, registry). Default: $SIMPAIR_HOME, else .simpair/ in the checkout."
    ),
]
SourcesOption = Annotated[
    str | None,
    typer.Option(
        help="Folder or fsspec URL (s3://bucket/raw) with the raw files. "
        "Default: $SIMPAIR_SOURCES, else ../shared/data."
    ),
]
ModelOption = Annotated[str | None, typer.Option(help="Model directory or registry ref. Default: newest.")]
BiEncoderOption = Annotated[str, typer.Option(help="Bi-encoder: name@alias, name/version or a model folder.")]
ProfileOption = Annotated[
    str, typer.Option("--profile", help="Nightly profile: default | smoke | path to YAML.")
]
NoPrefectOption = Annotated[
    bool,
    typer.Option(
        "--no-prefect", help="Run in this process without Prefect: no flow run, no server, no artifact."
    ),
]
JsonOutOption = Annotated[Path | None, typer.Option("--json", help="Also write the summary as JSON here.")]
SentenceColumnOption = Annotated[str, typer.Option(help="Column holding the sentences.")]
IdColumnOption = Annotated[
    str | None, typer.Option(help="Column identifying each row (default: the row number).")
]
ModelDirOutOption = Annotated[Path | None, typer.Option(help="Output model directory.")]
EvaluateAfterOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Evaluate on DATASET/SPLIT afterwards (repeatable). Default with --config: evaluate_on."
    ),
]

EXIT_NO_MODEL = 4  # score, mine, encode: the model reference resolves to nothing in the registry


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


def resolve_model_option(model: str | None, home: Path) -> Path:
    """A directory, a registry reference (name@alias or name/version), or the newest trained model."""
    from simpair.model_ref import NoModel, resolve_model_ref

    try:
        return Path(resolve_model_ref(model, home, when_none="latest").local_dir)
    except NoModel as exc:
        raise typer.BadParameter(str(exc), param_hint="--model") from None


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


def train_combined_from_config(
    config: Path,
    home: Path,
    sets: list[str] | None,
    jobs: int,
    out: Path | None,
    splits: list[tuple[str, str]],
    combine: str | None,
) -> None:
    """`simpair stack`, `soup` and `cascade` with `--config`: train the members, combine, print."""
    from simpair.ensemble.train import MemberFailed, train_stack_file

    overrides = parse_sets(sets)
    try:
        result = train_stack_file(config, home, overrides, jobs, out, combine=combine)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    except MemberFailed as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    print_combined(Console(), result.model_dir, home, splits or result.evaluate_on)


def print_combined(console: Console, target: Path, home: Path, splits: list[tuple[str, str]]) -> None:
    """The stack's, soup's or cascade's directory and dev metrics, then its evaluation on `splits`."""
    console.print(f"model: {target}", soft_wrap=True)
    metrics = json.loads((target / "metrics.json").read_text())
    console.print_json(
        json.dumps(
            {
                "dev": metrics["dev"],
                "members": metrics.get("members_dev") or metrics.get("soup") or metrics.get("cascade"),
            }
        )
    )
    if splits:
        from simpair.evaluation.splits import evaluate_model

        print_eval(console, evaluate_model(target, home, splits))


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as the sentences our validators wrote (or pydantic's, with the field), no dump."""

    def reason(error: Any) -> str:
        message = str(error["msg"]).removeprefix("Value error, ")
        where = ".".join(str(part) for part in error.get("loc", ()))
        return f"{where}: {message}" if where else message

    return "; ".join(reason(e) for e in exc.errors())
