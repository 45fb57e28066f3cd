"""Prefect tasks for pre-tokenizing, training and evaluating: thin wrappers over the domain functions.

Tagged `gpu` so a deployment can route them to a GPU work pool (a tag-based concurrency limit of
`gpu` also stops two trainings sharing one card); they run unchanged on CPU workers. No flow here:
`simpair.nightly.train.run_training` calls their stages, and the `train-and-evaluate` flow maps each
stage to its task here. Caching is off: the token cache is already content-addressed, and retraining
nightly on unchanged arguments is the point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from simpair.ensemble import StackConfig
from simpair.ensemble.train import combine_members
from simpair.evaluation.splits import EvalResult, evaluate_model
from simpair.selection.gate import wise_ft_markdown
from simpair.selection.wise_path import apply_wise_ft
from simpair.selection.wise_rule import WiseFtPolicy
from simpair.tokens import TokenSplit
from simpair.training import TrainConfig, TrainResult
from simpair.training.pretokenize import pretokenize_config
from simpair.training.workers import TRAIN_TIMEOUT_SECONDS, train_model


def _config(config: TrainConfig | str | Path) -> TrainConfig:
    return config if isinstance(config, TrainConfig) else TrainConfig.from_yaml(config)


@task(name="pretokenize", tags=["gpu"], cache_policy=NO_CACHE, retries=1, retry_delay_seconds=10)
def pretokenize_task(config: TrainConfig | str | Path, home: Path) -> list[TokenSplit]:
    """Tokenize every split the config reads (reuses cached tokens for unchanged data and tokenizer)."""
    return pretokenize_config(_config(config), Path(home))


@task(name="train", tags=["gpu"], cache_policy=NO_CACHE, timeout_seconds=TRAIN_TIMEOUT_SECONDS)
def train_task(
    config: TrainConfig | str | Path,
    home: Path,
    isolated: bool = False,
    progress_slot: int | None = None,
) -> TrainResult:
    """Train one model; its directory holds weights, tokenizer, simpair.json and metrics.json.

    `isolated` trains in a fresh process, so tasks submitted side by side do not share torch's
    per-process random state and thread pool (nightly stack members with `jobs` > 1);
    `progress_slot` then gives its progress bar a terminal line of its own. That process is stopped
    after TRAIN_TIMEOUT_SECONDS by the task itself: side by side the task runs in a worker thread, where
    Prefect's `timeout_seconds` cannot stop it (`side_by_side_train_task` drops it, and with it the
    warning Prefect would log on every run).
    """
    cfg = _config(config)
    result = train_model(cfg, Path(home), isolated, progress_slot, TRAIN_TIMEOUT_SECONDS)
    dev = result.metrics.get("dev", {})
    rows = "\n".join(f"| {k} | {v:.4f} |" for k, v in dev.items() if isinstance(v, float))
    create_markdown_artifact(
        key=f"train-{cfg.name}".lower().replace("_", "-").replace(".", "-"),
        markdown=(
            f"# Trained `{cfg.name}`\n\nModel: `{result.model_dir}`\n\n"
            f"| dev metric | value |\n|---|---|\n{rows}\n"
        ),
        description=f"{cfg.kind}-encoder {cfg.objective} on {[r.label() for r in cfg.train]}",
    )
    return result


@task(name="combine-members", tags=["gpu"], cache_policy=NO_CACHE, retries=1, retry_delay_seconds=10)
def combine_task(config: StackConfig, member_dirs: list[Path], home: Path) -> Path:
    """Stack, soup or cascade a stack config's trained members (fitted on their shared dev split)."""
    out = combine_members(config, [Path(d) for d in member_dirs], Path(home))
    metrics = json.loads((out / "metrics.json").read_text())
    rows = "\n".join(f"| {k} | {v:.4f} |" for k, v in metrics["dev"].items() if isinstance(v, float))
    title = {"stack": "Stacked", "soup": "Souped", "cascade": "Cascaded"}[config.combine]
    create_markdown_artifact(
        key=f"{config.combine}-{config.name}".lower().replace("_", "-").replace(".", "-"),
        markdown=(
            f"# {title} `{config.name}`\n\nModel: `{out}`\n\nMembers: "
            + ", ".join(f"`{Path(d).name}`" for d in member_dirs)
            + f"\n\n| dev metric | value |\n|---|---|\n{rows}\n"
        ),
        description=f"{config.combine} of {len(member_dirs)} models, {config.task}",
    )
    return out


@task(name="wise-ft", tags=["gpu"], cache_policy=NO_CACHE, retries=1, retry_delay_seconds=10)
def wise_ft_task(model_dir: Path, home: Path, policy: WiseFtPolicy) -> Path:
    """Walk the WiSE-FT path of a trained model on dev and choice canaries; the chosen interpolation's
    directory (its path and the rule under `wise_ft` in metrics.json), published as an artifact."""
    out = apply_wise_ft(Path(model_dir), Path(home), policy)
    record = json.loads((out / "metrics.json").read_text())["wise_ft"]
    create_markdown_artifact(
        key=f"wise-ft-{Path(model_dir).name}".lower().replace("_", "-").replace(".", "-")[:100],
        markdown=f"# WiSE-FT choice\n\n{wise_ft_markdown(record)}",
        description=f"alpha {record['alpha']:g} for {Path(model_dir).name}",
    )
    return out


@task(name="evaluate", tags=["gpu"], cache_policy=NO_CACHE, retries=1, retry_delay_seconds=10)
def evaluate_task(
    model_dir: Path,
    home: Path,
    datasets: list[tuple[str, str]] | None = None,
    exclude_leaked: bool = True,
    group_pattern: str | None = None,
) -> EvalResult:
    """Evaluate a saved model (threshold from dev; leaked pairs excluded) and publish the report.

    With `group_pattern` the report (and so the artifact) also has one table per split by group of
    pair ids, e.g. per STS-B genre.
    """
    result = evaluate_model(
        model_dir, Path(home), datasets, exclude_leaked=exclude_leaked, group_pattern=group_pattern
    )
    create_markdown_artifact(
        key=f"evaluate-{Path(model_dir).name}".lower().replace("_", "-").replace(".", "-")[:100],
        markdown=result.report_path.read_text(),
        description=f"evaluation of {Path(model_dir).name}",
    )
    return result


def side_by_side_train_task() -> Any:
    """`train_task` for worker threads: no Prefect timeout (the training process enforces its own)."""
    copied = train_task.with_options()  # with_options reads None as "keep the timeout"
    copied.timeout_seconds = None
    return copied
