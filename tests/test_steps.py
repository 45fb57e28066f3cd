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
from simpair.stages import declaration, step


def test_every_task_built_from_a_step_has_its_name_retries_and_signature() -> None:
    from simpair.flows.nightly_retrain import NIGHT
    from simpair.flows.nightly_score import STEPS
    from simpair.tasks.stages import stage_of

    tasks = [*STEPS.tasks.values(), *NIGHT]
    assert len(tasks) == 16
    for task in tasks:
        stage = stage_of(task)
        declared = declaration(stage)
        assert task.name == declared.name and task.retries == declared.retries
        assert task.task_run_name == declared.run_name and set(task.tags) == set(declared.tags)
        # the task's parameters are the step's own: no signature written a second time
        assert inspect.signature(task.fn) == inspect.signature(stage)
    chunk = STEPS.tasks[score_chunk]
    assert (chunk.name, chunk.retries, chunk.task_run_name) == ("score-chunk", 2, "score-{plan.name}-{idx}")


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
    assert declaration(night.gate).profile_retries and declaration(night.gate).name == "promotion-gate"
