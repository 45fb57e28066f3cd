"""CLI commands for the train stage: pretokenize, train, evaluate, stack, soup, predict.

Each command parses its options, calls the domain (`simpair.training`, `simpair.ensemble`,
`simpair.evaluation`) and prints; `--set` parsing and config loading live in
`simpair.training.config`, the stack/soup config path in `simpair.ensemble.train`. Heavy imports
(torch, transformers) happen inside the commands, so `simpair --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

JobsOption = Annotated[
    int,
    typer.Option(
        min=1,
        help="With --config: train this many members at once, each in its own process with "
        "cores/jobs threads (CPU: 2 on 2 cores halves a two-member stack's wall time).",
    ),
]
HomeOption = Annotated[
    Path | None, typer.Option(help="Pipeline home. Default: $SIMPAIR_HOME, else .simpair/ in the checkout.")
]


def _overrides(values: list[str] | None) -> dict[str, Any]:
    """`--set key=value` pairs; values are parsed as YAML (numbers, booleans, lists)."""
    from simpair.training.config import parse_overrides

    try:
        return parse_overrides(values)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _load_config(config: Path, overrides: list[str] | None) -> Any:
    from simpair.training.config import load_train_config

    changes = _overrides(overrides)
    try:
        return load_train_config(config, changes)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc


def _parse_split(value: str) -> tuple[str, str]:
    from simpair.training.config import parse_split

    try:
        return parse_split(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _resolve_model(model: str | None, home: Path) -> Path:
    """A directory, a registry reference (name@alias or name/version), or the newest trained model."""
    from simpair.model_ref import NoModel, resolve_model_ref

    try:
        return Path(resolve_model_ref(model, home, when_none="latest").local_dir)
    except NoModel as exc:
        raise typer.BadParameter(str(exc), param_hint="--model") from None


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

        cfg = _load_config(config, None)
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

        cfg = _load_config(config, set_)
        home_path = settings.home_dir(home)
        result = train(cfg, home_path)
        console = Console()
        console.print(f"model: {result.model_dir}")
        console.print_json(json.dumps(result.metrics.get("dev", {})))
        if evaluate and cfg.evaluate_on:
            from simpair.evaluate import evaluate_model

            ev = evaluate_model(result.model_dir, home_path, [(r.dataset, r.split) for r in cfg.evaluate_on])
            _print_eval(console, ev)

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
            bool, typer.Option(help="Exclude pairs the leakage report finds in the model's training data.")
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
    ) -> None:
        """Metrics, PNG plots and a markdown report for a saved model (threshold as chosen on dev)."""
        from simpair import settings
        from simpair.evaluate import evaluate_model

        home_path = settings.home_dir(home)
        model_dir = _resolve_model(model, home_path)
        splits = [_parse_split(s) for s in split] if split else None
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
        _print_eval(Console(), ev)

    @app.command("stack")
    def stack_cmd(
        config: Annotated[
            Path | None,
            typer.Option(
                help="Stack config (YAML with members:), e.g. configs/stsb-stack.yaml: trains its members, "
                "then stacks them. A soup config (combine: soup) also works here; `simpair soup --config` "
                "is its usual name."
            ),
        ] = None,
        member: Annotated[
            list[str] | None,
            typer.Option(
                help="Or: an already trained member (directory or registry ref; repeat, two or more)."
            ),
        ] = None,
        out: Annotated[Path | None, typer.Option(help="Output model directory.")] = None,
        home: HomeOption = None,
        set_: Annotated[
            list[str] | None,
            typer.Option("--set", help="Override a field in every member's training config."),
        ] = None,
        lexical: Annotated[bool, typer.Option(help="Add word-overlap and length-ratio features.")] = True,
        zero_shot: Annotated[
            bool,
            typer.Option(help="Add the members' pre-trained backbone, untouched, as one more member."),
        ] = False,
        products: Annotated[
            bool,
            typer.Option(help="Add the members' outputs squared and multiplied pairwise (degree 2)."),
        ] = False,
        split: Annotated[
            list[str] | None,
            typer.Option(help="Evaluate on DATASET/SPLIT afterwards (repeatable). Default: evaluate_on."),
        ] = None,
        jobs: JobsOption = 1,
    ) -> None:
        """Stack models: a linear model on their outputs (e.g. a cross- and a bi-encoder), fitted on dev.

        From trained --member models, or from a stack config (--config) whose members it trains
        first. To average one backbone's fine-tunes into one model, use `simpair soup`.
        The result is a model directory like any other: evaluate, predict, register and score it.
        """
        from simpair import settings
        from simpair.ensemble import fit_stack
        from simpair.models.io import new_model_dir

        if (config is None) == (not member):
            raise typer.BadParameter("give either --config or --member (two or more)", param_hint="--config")
        home_path = settings.home_dir(home)
        splits = [_parse_split(s) for s in split] if split else []
        if config is not None:
            _train_from_config(config, home_path, set_, jobs, out, splits, combine=None)
            return
        try:
            members = [_resolve_model(m, home_path) for m in member or []]
            target = fit_stack(
                members,
                home_path,
                out or new_model_dir(home_path / "models", "stack"),
                lexical,
                zero_shot=zero_shot,
                products=products,
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--member") from exc
        _print_combined(Console(), target, home_path, splits)

    @app.command("soup")
    def soup_cmd(
        member: Annotated[
            list[str] | None,
            typer.Option(help="A fine-tune of one backbone (directory or registry ref; repeat)."),
        ] = None,
        config: Annotated[
            Path | None,
            typer.Option(
                help="Or: a soup config (combine: soup), e.g. configs/stsb-bi-soup.yaml: trains its "
                "ingredients (every member config once per seed), then soups them."
            ),
        ] = None,
        out: Annotated[Path | None, typer.Option(help="Output model directory.")] = None,
        home: HomeOption = None,
        split: Annotated[
            list[str] | None,
            typer.Option(
                help="Evaluate on DATASET/SPLIT afterwards (repeatable). Default with --config: evaluate_on."
            ),
        ] = None,
        remove_directions: Annotated[
            int | None,
            typer.Option(
                min=0,
                help="With --member, bi-encoders: centre the soup's embeddings and remove this many top "
                "directions (default: what the ingredients were trained with).",
            ),
        ] = None,
        set_: Annotated[
            list[str] | None,
            typer.Option(
                "--set", help="With --config: override a field in every ingredient's training config."
            ),
        ] = None,
        jobs: JobsOption = 1,
    ) -> None:
        """Average the weights of fine-tunes (e.g. two seeds) into one model: a greedy soup chosen on dev.

        From trained --member models, or from a soup config (--config) whose ingredients it trains
        first. To combine different models' outputs instead, use `simpair stack`.
        """
        from simpair import settings
        from simpair.ensemble import fit_soup
        from simpair.models.io import new_model_dir

        if (config is None) == (not member):
            raise typer.BadParameter("give either --config or --member (repeat it)", param_hint="--config")
        home_path = settings.home_dir(home)
        splits = [_parse_split(s) for s in split] if split else []
        if config is not None:
            if remove_directions is not None:
                raise typer.BadParameter(
                    "--remove-directions applies to --member soups; a soup config's ingredients set "
                    "their own postprocess",
                    param_hint="--remove-directions",
                )
            _train_from_config(config, home_path, set_, jobs, out, splits, combine="soup")
            return
        members = [_resolve_model(m, home_path) for m in member or []]
        try:
            target = fit_soup(
                members, home_path, out or new_model_dir(home_path / "models", "soup"), remove_directions
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--member") from exc
        console = Console()
        console.print(f"model: {target}")
        metrics = json.loads((target / "metrics.json").read_text())
        console.print_json(json.dumps({"dev": metrics["dev"], "soup": metrics["soup"]}))
        if splits:
            from simpair.evaluate import evaluate_model

            _print_eval(console, evaluate_model(target, home_path, splits))

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

        model_dir = _resolve_model(model, settings.home_dir(home))
        predictor = load_predictor(model_dir)
        out = predictor.predict([text_a], [text_b])
        result: dict[str, Any] = {k: v[0].item() for k, v in out.items()}
        result["truncated"] = bool(predictor.truncated([text_a], [text_b])[0])
        result["model"] = str(model_dir)
        if as_json:
            typer.echo(json.dumps(result))
            return
        kind = "stacked ensemble" if predictor.kind == "stacked" else f"{predictor.kind}-encoder"
        table = Table("field", "value", title=f"{kind}, task {predictor.task}")
        for key, value in result.items():
            table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
        Console().print(table)


def _train_from_config(
    config: Path,
    home: Path,
    sets: list[str] | None,
    jobs: int,
    out: Path | None,
    splits: list[tuple[str, str]],
    combine: str | None,
) -> None:
    """`simpair stack --config` and `simpair soup --config`: one path for both."""
    from simpair.ensemble.train import MemberFailed, train_stack_file

    overrides = _overrides(sets)
    try:
        result = train_stack_file(config, home, overrides, jobs, out, combine=combine)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    except MemberFailed as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    _print_combined(Console(), result.model_dir, home, splits or result.evaluate_on)


def _print_combined(console: Console, target: Path, home: Path, splits: list[tuple[str, str]]) -> None:
    """The stack's or soup's directory and dev metrics, then its evaluation on `splits`."""
    console.print(f"model: {target}")
    metrics = json.loads((target / "metrics.json").read_text())
    console.print_json(
        json.dumps({"dev": metrics["dev"], "members": metrics.get("members_dev") or metrics.get("soup")})
    )
    if splits:
        from simpair.evaluate import evaluate_model

        _print_eval(console, evaluate_model(target, home, splits))


def _print_eval(console: Console, ev: Any) -> None:
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
