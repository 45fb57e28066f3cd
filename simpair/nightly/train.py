"""One task's training DAG, defined once: pre-tokenize -> train (members side by side, stack or soup)
-> WiSE-FT choice -> evaluate. What the `train-and-evaluate` flow runs, and `simpair nightly --no-prefect`.

`run_training(job, runner)` calls its stages through a `simpair.stages.StageRunner`: the flow hands
it `PrefectStages` over the tasks in `simpair.tasks.training` (each stage a task tagged `gpu`, built
from its step's declaration), the in-process night a `RetryingInProcess`. Every stage but the
side-by-side trainings is declared with `profile_retries`: it is retried on transient faults with the
profile's retries either way.

A stack config (`members:`) trains every member like a single model, `job.jobs` at a time (each in
its own process when more than one), combines nested stacks bottom-up, then fits the stack on dev.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from simpair import settings
from simpair.ensemble import StackConfig, is_stack_config
from simpair.ensemble.train import build_stack, combine_members, train_configs
from simpair.evaluation.splits import evaluate_model
from simpair.nightly.plan import config_dump
from simpair.nightly.profile import Retries, load_profile
from simpair.nightly.retry import RetryingInProcess
from simpair.nightly.summary import Trained
from simpair.selection.wise_path import apply_wise_ft
from simpair.selection.wise_rule import WiseFtPolicy
from simpair.stages import StageRunner
from simpair.training import TrainConfig
from simpair.training.pretokenize import pretokenize_config
from simpair.training.reviews import ReviewUse, with_reviews
from simpair.training.workers import train_model


@dataclass(frozen=True)
class TrainingJob:
    """What one task's training needs, every field resolved (see `TrainingJob.resolve`)."""

    task_name: str
    config_path: str
    home: str
    eval_sets: list[tuple[str, str]]
    retries: Retries
    jobs: int
    wise_ft: WiseFtPolicy | None = None
    # the task's `reviews:` block: reviewed training pairs added, reviewed traffic kept out of training
    reviews: ReviewUse | None = None

    @classmethod
    def resolve(
        cls,
        task_name: str,
        config_path: str | None = None,
        home: str | Path | None = None,
        eval_sets: list[tuple[str, str]] | None = None,
        retries: Retries | None = None,
        jobs: int | None = None,
        profile: str = "default",
        wise_ft: WiseFtPolicy | None = None,
        reviews: ReviewUse | None = None,
    ) -> TrainingJob:
        """Only `task_name` is required: the rest defaults to that task's entry in the nightly
        `profile`, the home to `$SIMPAIR_HOME`."""
        if config_path is None or eval_sets is None or retries is None or jobs is None:
            plan = load_profile(profile)
            if task_name not in plan.tasks:
                raise ValueError(f"task {task_name!r} is not in nightly profile {profile!r}")
            task_plan = plan.tasks[task_name]
            config_path = config_path or str(task_plan.config_path())
            eval_sets = task_plan.evaluate if eval_sets is None else eval_sets
            retries = retries or plan.retries
            jobs = task_plan.jobs if jobs is None else jobs
            wise_ft = wise_ft or task_plan.wise_ft
            reviews = reviews or task_plan.reviews
        home_dir = str(settings.home_dir(home))
        return cls(task_name, config_path, home_dir, list(eval_sets), retries, jobs, wise_ft, reviews)


def train_side_by_side(
    task_name: str, configs: list[TrainConfig], home: Path, jobs: int, retries: Retries
) -> list[Path]:
    """Model directories of `configs`, `jobs` trainings at once, each in its own process (as
    `simpair stack --jobs`); in the flow each is its own `train` task (`simpair.tasks.nightly`)."""
    print(f"[{task_name}] training {len(configs)} configs, {jobs} at once")
    return train_configs(configs, Path(home), jobs)


def run_training(job: TrainingJob, runner: StageRunner) -> Trained:
    """Pre-tokenize, train and evaluate one task, each stage run by `runner`."""
    if is_stack_config(job.config_path):
        return _train_stack(job, runner)
    started = time.monotonic()
    home = Path(job.home)
    config = _with_reviews(job, TrainConfig.from_yaml(job.config_path))
    print(f"[{job.task_name}] pre-tokenizing for {config.name}")
    runner.run(pretokenize_config, config=config, home=home)
    print(
        f"[{job.task_name}] training {config.name}: {config.kind}-encoder, {config.objective}, "
        f"{config.epochs} epoch(s)"
    )
    trained = runner.run(train_model, config=config, home=home)
    model_dir, metrics = Path(trained.model_dir), trained.metrics
    if job.wise_ft is not None:
        model_dir = _choose_alpha(job, model_dir, job.wise_ft, runner)
        metrics = json.loads((model_dir / "metrics.json").read_text())
    print(f"[{job.task_name}] evaluating {model_dir.name} on {job.eval_sets}")
    evaluated = runner.run(evaluate_model, model_dir=model_dir, home=home, datasets=list(job.eval_sets))
    return Trained.of_model(
        job.task_name,
        model_dir,
        config.model_dump(mode="json"),
        metrics,
        trained.history,
        evaluated,
        time.monotonic() - started,
    )


def _train_configs(job: TrainingJob, configs: list[TrainConfig], runner: StageRunner) -> list[Path]:
    """Every config pre-tokenized, then trained as its own stage; model directories in config order."""
    home = Path(job.home)
    configs = [_with_reviews(job, config) for config in configs]
    for config in configs:
        runner.run(pretokenize_config, config=config, home=home)
    if job.jobs > 1:
        return runner.run(
            train_side_by_side,
            task_name=job.task_name, configs=configs, home=home, jobs=job.jobs, retries=job.retries,
        )  # fmt: skip
    dirs = []
    for config in configs:
        print(f"[{job.task_name}] training {config.name}: {config.kind}-encoder, {config.epochs} epoch(s)")
        dirs.append(Path(runner.run(train_model, config=config, home=home).model_dir))
    return dirs


def _train_stack(job: TrainingJob, runner: StageRunner) -> Trained:
    """Members trained like single models, nested stacks combined bottom-up (each its own stage), the
    stack fitted on dev, then the WiSE-FT choice if asked.

    A cascade takes the WiSE-FT choice member by member before its band is fitted: the band is fitted
    on the decisions of the cross-encoder it will run, so it must see the chosen interpolation."""
    started = time.monotonic()
    home = Path(job.home)
    top = StackConfig.from_yaml(job.config_path)
    members_first = job.wise_ft is not None and top.combine == "cascade"

    def combine(stack: StackConfig, members: list[Path]) -> Path:
        if members_first and stack is top:
            members = [_choose_alpha(job, Path(member), job.wise_ft, runner) for member in members]
        return Path(runner.run(combine_members, config=stack, member_dirs=members, home=home))

    model_dir = build_stack(
        top,
        lambda configs: _train_configs(job, configs, runner),
        combine,
        on_nested=lambda nested: print(
            f"[{job.task_name}] stack member {nested.name}: a {nested.combine} of its own members"
        ),
        home=home,
    )
    if job.wise_ft is not None and not members_first:
        model_dir = _choose_alpha(job, Path(model_dir), job.wise_ft, runner)
    print(f"[{job.task_name}] evaluating {Path(model_dir).name} on {job.eval_sets}")
    evaluated = runner.run(evaluate_model, model_dir=model_dir, home=home, datasets=list(job.eval_sets))
    return Trained.of_stack(
        job.task_name, model_dir, config_dump(Path(job.config_path)), evaluated, time.monotonic() - started
    )


def _with_reviews(job: TrainingJob, config: TrainConfig) -> TrainConfig:
    """The config with the task's reviews added (`simpair.training.reviews`), said in one line."""
    changed = with_reviews(config, Path(job.home), job.reviews)
    added = [ref.label() for ref in changed.train if ref not in config.train]
    protected = [ref.label() for ref in changed.evaluate_on if ref not in config.evaluate_on]
    if added or protected:
        print(
            f"[{job.task_name}] reviews: training on {added or 'no reviewed pairs'}; "
            f"kept out of training: {protected or 'no reviewed traffic'}"
        )
    return changed


def _choose_alpha(job: TrainingJob, model_dir: Path, policy: WiseFtPolicy, runner: StageRunner) -> Path:
    print(f"[{job.task_name}] WiSE-FT path of {model_dir.name}: alphas {policy.grid()}")
    chosen = Path(runner.run(apply_wise_ft, model_dir=model_dir, home=Path(job.home), policy=policy))
    record = json.loads((chosen / "metrics.json").read_text())["wise_ft"]
    print(f"[{job.task_name}] WiSE-FT {record['reason']}")
    return chosen


def train_here(
    task_name: str,
    config_path: str,
    home: str,
    eval_sets: list[tuple[str, str]],
    retries: Retries,
    jobs: int,
    wise_ft: WiseFtPolicy | None = None,
    reviews: ReviewUse | None = None,
) -> Trained:
    """One task's training in this process (the night's in-process path; the flow runs the
    `train-and-evaluate` flow with the same arguments instead)."""
    job = TrainingJob.resolve(
        task_name, config_path, home, eval_sets, retries, jobs, wise_ft=wise_ft, reviews=reviews
    )
    return run_training(job, RetryingInProcess(retries))
