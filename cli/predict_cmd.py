"""CLI command `simpair predict`: score one pair with a saved or registered model.

The predictor (and torch) is loaded inside the command, so `simpair --help` stays fast.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    ModelOption,
    ModelTaskOption,
    Task,
    json_owns_stdout,
    report_console,
    resolve_model_option,
    write_json,
)


def predict(
    text_a: Annotated[str, typer.Argument(help="First sentence.")],
    text_b: Annotated[str, typer.Argument(help="Second sentence.")],
    model: ModelOption = None,
    task: ModelTaskOption = Task.paraphrase,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """Score one pair: score (0-1), and for paraphrase models probability and label."""
    from simpair import settings

    # the model first: on a fresh home `no model` comes at once, not after torch's import (~10 s)
    model_dir = resolve_model_option(model, settings.home_dir(home), task)
    from simpair.runtime.loader import load_predictor

    predictor = load_predictor(model_dir)
    out = predictor.predict([text_a], [text_b])
    result: dict[str, Any] = {k: v[0].item() for k, v in out.items()}
    result["truncated"] = bool(predictor.truncated([text_a], [text_b])[0])
    result["model"] = str(model_dir)
    names = {"stacked": "stacked ensemble", "cascade": "bi -> cross cascade"}
    kind = names.get(predictor.kind, f"{predictor.kind}-encoder")
    table = Table("field", "value", title=f"{kind}, task {predictor.task}")
    for key, value in result.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    report_console(json_out).print(table)  # on stderr with --json -: stdout holds the JSON only
    write_json(result, json_out)


def register(app: typer.Typer) -> None:
    """Add `simpair predict` to the top-level app."""
    app.command("predict")(json_owns_stdout(predict))
