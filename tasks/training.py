"""Prefect tasks for pre-tokenizing, training, combining, the WiSE-FT choice and evaluating, each built
from its step's declaration (`simpair.tasks.stages.as_task`), with the markdown artifact it publishes.

Each step is declared `gpu` so a deployment can route its task to a GPU work pool (a tag-based
concurrency limit of `gpu` also stops two trainings sharing one card); they run unchanged on CPU
workers. No flow here: `simpair.nightly.train.run_training` calls the steps, and the
`train-and-evaluate` flow lists these tasks. Caching is off: the token cache is already
content-addressed, and retraining nightly on unchanged arguments is the point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import Task
from prefect.artifacts import create_markdown_artifact

from simpair.ensemble.train import combine_members
from simpair.evaluation.splits import EvalResult, evaluate_model
from simpair.selection.gate import wise_ft_markdown
from simpair.selection.wise_path import apply_wise_ft
from simpair.tasks.stages import as_task
from simpair.training import TrainResult
from simpair.training.pretokenize import pretokenize_config
from simpair.training.workers import train_model


def _key(prefix: str, name: str) -> str:
    """An artifact key: lower case, dashes, at most 100 characters (Prefect's rules)."""
    return f"{prefix}-{name}".lower().replace("_", "-").replace(".", "-")[:100]


def _dev_rows(dev: dict[str, Any]) -> str:
    return "\n".join(f"| {k} | {v:.4f} |" for k, v in dev.items() if isinstance(v, float))


def _publish_trained(result: TrainResult, arguments: dict[str, Any]) -> None:
    config = arguments["config"]
    create_markdown_artifact(
        key=_key("train", config.name),
        markdown=(
            f"# Trained `{config.name}`\n\nModel: `{result.model_dir}`\n\n"
            f"| dev metric | value |\n|---|---|\n{_dev_rows(result.metrics.get('dev', {}))}\n"
        ),
        description=f"{config.kind}-encoder {config.objective} on {[r.label() for r in config.train]}",
    )


def _publish_combined(out: Path, arguments: dict[str, Any]) -> None:
    config, member_dirs = arguments["config"], arguments["member_dirs"]
    metrics = json.loads((Path(out) / "metrics.json").read_text())
    title = {"stack": "Stacked", "soup": "Souped", "cascade": "Cascaded"}[config.combine]
    create_markdown_artifact(
        key=_key(config.combine, config.name),
        markdown=(
            f"# {title} `{config.name}`\n\nModel: `{out}`\n\nMembers: "
            + ", ".join(f"`{Path(d).name}`" for d in member_dirs)
            + f"\n\n| dev metric | value |\n|---|---|\n{_dev_rows(metrics['dev'])}\n"
        ),
        description=f"{config.combine} of {len(member_dirs)} models, {config.task}",
    )


def _publish_wise_ft(out: Path, arguments: dict[str, Any]) -> None:
    name = Path(arguments["model_dir"]).name
    record = json.loads((Path(out) / "metrics.json").read_text())["wise_ft"]
    create_markdown_artifact(
        key=_key("wise-ft", name),
        markdown=f"# WiSE-FT choice\n\n{wise_ft_markdown(record)}",
        description=f"alpha {record['alpha']:g} for {name}",
    )


def _publish_evaluation(result: EvalResult, arguments: dict[str, Any]) -> None:
    """The evaluation report as the artifact (with `group_pattern`, one table per split by group)."""
    name = Path(arguments["model_dir"]).name
    create_markdown_artifact(
        key=_key("evaluate", name),
        markdown=result.report_path.read_text(),
        description=f"evaluation of {name}",
    )


# tokens for every split the config reads (cached tokens reused for unchanged data and tokenizer)
pretokenize_task = as_task(pretokenize_config)
# one model (weights, tokenizer, simpair.json, metrics.json); its dev metrics as an artifact
train_task = as_task(train_model, then=_publish_trained)
# stack, soup or cascade of a stack config's trained members, fitted on their shared dev split
combine_task = as_task(combine_members, then=_publish_combined)
# the chosen interpolation of the WiSE-FT path (the rule under `wise_ft` in its metrics.json)
wise_ft_task = as_task(apply_wise_ft, then=_publish_wise_ft)
# the saved model on its splits (threshold from dev; leaked pairs excluded), the report an artifact
evaluate_task = as_task(evaluate_model, then=_publish_evaluation)


def side_by_side_train_task() -> Task[..., TrainResult]:
    """`train_task` for worker threads: no Prefect timeout (the training process enforces its own,
    which Prefect's `timeout_seconds` could not stop in a worker thread, and would warn about)."""
    copied = train_task.with_options()  # with_options reads None as "keep the timeout"
    copied.timeout_seconds = None
    return copied
