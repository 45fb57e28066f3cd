"""Each pipeline step is declared once, on its domain function; its Prefect task, the in-process
runner's retries and the pool dispatch's parameters are read from that declaration."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from simpair.nightly import night
from simpair.nightly.profile import Retries, load_profile
from simpair.nightly.retry import RetryingInProcess
from simpair.registry.faults import is_transient
from simpair.scoring.chunk import score_chunk
from simpair.selection.promotion import run_gate
from simpair.stages import declaration, step


def test_every_task_built_from_a_step_has_its_name_retries_and_signature() -> None:
    from simpair.flows.nightly_retrain import NIGHT
    from simpair.flows.nightly_score import STEPS
    from simpair.tasks.stages import stage_of

    tasks = [*STEPS.tasks.values(), *NIGHT]
    assert len(tasks) == 20  # publish-night-report among the night's steps
    for task in tasks:
        stage = stage_of(task)
        declared = declaration(stage)
        assert task.name == declared.name and task.retries == declared.retries
        assert task.task_run_name == declared.run_name and set(task.tags) == set(declared.tags)
        # the task's parameters are the step's own: no signature written a second time
        assert inspect.signature(task.fn) == inspect.signature(stage)
    chunk = STEPS.tasks[score_chunk]
    assert (chunk.name, chunk.retries, chunk.task_run_name) == ("score-chunk", 2, "score-{plan.name}-{idx}")


def test_training_ingest_and_mine_tasks_are_built_from_their_steps() -> None:
    """Each task of the training, ingest and mine DAGs has its step's name, retries, timeout, tags and
    run name, and the step function's own parameters; the flows list the tasks, with no table of steps."""
    from simpair.flows.ingest import STEPS as INGEST
    from simpair.flows.mine import STEPS as MINE
    from simpair.flows.nightly_retrain import TRAINING
    from simpair.nightly.train import train_side_by_side
    from simpair.tasks.ingest import parse_file_task
    from simpair.tasks.stages import Instead, stage_of
    from simpair.training.workers import TRAIN_TIMEOUT_SECONDS

    tasks = [t for t in TRAINING if not isinstance(t, Instead)]
    tasks += [*INGEST.tasks.values(), parse_file_task, *MINE.tasks.values()]
    names = [t.name for t in tasks]
    assert names == [
        "pretokenize", "train", "combine-members", "wise-ft", "evaluate",
        "load-contracts", "ingest-source", "update-leakage", "publish-ingest-summary", "parse-file",
        "resolve-model", "read-sentences", "encode-sentences", "find-pairs", "pairs-table", "rerank-pairs",
        "write-pairs",
    ]  # fmt: skip
    for task in tasks:
        stage = stage_of(task)
        declared = declaration(stage)
        assert (task.name, task.retries, task.timeout_seconds) == (
            declared.name, declared.retries, declared.timeout_seconds,
        )  # fmt: skip
        assert task.task_run_name == declared.run_name and set(task.tags) == set(declared.tags)
        assert inspect.signature(task.fn) == inspect.signature(stage)
    training = {t.name: t for t in tasks[:5]}
    assert all(set(t.tags) == {"gpu"} for t in training.values())
    assert training["train"].timeout_seconds == TRAIN_TIMEOUT_SECONDS and training["train"].retries == 0
    assert [training[n].retries for n in ("pretokenize", "combine-members", "wise-ft", "evaluate")] == [1] * 4
    assert [training[n].retry_delay_seconds for n in ("pretokenize", "evaluate")] == [10, 10]
    assert INGEST.tasks[stage_of(tasks[6])].task_run_name == "ingest-{contract.dataset}"
    assert parse_file_task.task_run_name == "parse-{job.contract.dataset}-{job.relative}"
    assert MINE.quoted and MINE.tasks[stage_of(tasks[11])].task_run_name == "read-{path}"
    # members side by side are the one training step the flow runs otherwise (one `train` task each)
    assert [t.stage for t in TRAINING if isinstance(t, Instead)] == [train_side_by_side]


def test_training_retries_come_from_the_declarations_in_the_flow_and_in_process() -> None:
    """The profile's retries go to every training step declared with `profile_retries`, in the flow
    (`stages`) and in process (`RetryingInProcess`), read from the declaration (no list of retried steps)."""
    from simpair.flows.nightly_retrain import TRAINING
    from simpair.nightly import train
    from simpair.tasks.nightly import stages
    from simpair.tasks.stages import retry_if_transient

    retries = Retries(attempts=3, delays_seconds=[1.0, 2.0])
    runner = stages(TRAINING, retries)
    in_process = RetryingInProcess(retries)
    assert not hasattr(train, "RETRIED")
    retried = [train.pretokenize_config, train.train_model, train.combine_members]
    retried += [train.apply_wise_ft, train.evaluate_model]
    for stage in retried:
        task = runner.tasks[stage]
        assert (task.retries, task.retry_delay_seconds) == (3, [1.0, 2.0])
        assert task.retry_condition_fn is retry_if_transient
        assert in_process._retried(stage)
    assert runner.tasks[train.train_side_by_side].__name__ == "train_side_by_side_tasks"
    assert not in_process._retried(train.train_side_by_side)  # it retries each member's `train` task itself


def test_a_step_is_declared_once_and_given_to_a_flow_once() -> None:
    from simpair.tasks.stages import PrefectStages, as_task
    from simpair.training.workers import train_model

    with pytest.raises(TypeError, match="train_model is already declared as step 'train'"):
        step("train-again", retries=5)(train_model)
    assert declaration(train_model).name == "train"  # unchanged
    task = as_task(train_model)
    with pytest.raises(ValueError, match="step train_model is given twice"):
        PrefectStages([task, task])


def test_the_night_declares_no_stub_and_the_pool_reads_the_training_arguments(tmp_path: Path) -> None:
    from simpair.nightly.train import train_here
    from simpair.ops.pool_dispatch import _as_json

    assert not hasattr(night, "train_on_pool") and not hasattr(night, "PoolTraining")
    plan = load_profile("smoke")
    arguments = night.training_arguments(plan, "sts", tmp_path)
    assert set(arguments) <= set(inspect.signature(train_here).parameters)  # what train_here is given
    parameters = _as_json(arguments)  # what a run of the GPU deployment is given, beside result_path
    assert parameters["retries"] == plan.retries.model_dump(mode="json")
    assert parameters["eval_sets"] == [list(pair) for pair in plan.tasks["sts"].evaluate]
    assert parameters["config_path"] == str(plan.tasks["sts"].config_path())


def test_in_process_retries_come_from_the_declaration() -> None:
    calls: list[str] = []

    @step("flaky", profile_retries=True)
    def flaky() -> str:
        calls.append("flaky")
        if len(calls) < 2:
            raise ConnectionError("tracking store busy")
        return "ok"

    @step("once")
    def once() -> None:
        calls.append("once")
        raise ConnectionError("tracking store busy")

    assert is_transient(ConnectionError("x"))
    runner = RetryingInProcess(Retries(attempts=2, delays_seconds=[0.0]))
    assert runner.run(flaky) == "ok" and calls == ["flaky", "flaky"]
    with pytest.raises(ConnectionError):
        runner.run(once)
    assert calls.count("once") == 1  # declared without profile retries: not retried
    assert declaration(run_gate).profile_retries and declaration(run_gate).name == "promotion-gate"
