"""Nightly profiles: which tasks a night trains, from which config, evaluated and gated how.

A profile (`configs/nightly.yaml`, `configs/nightly-smoke.yaml`) lists the tasks to train, the training
config of each, the evaluation splits and the gate policy. Named profiles and project-relative paths
resolve through `simpair.settings.shipped_path`, so they work from a checkout and installed alike. A
task's relative `config` is looked for beside the profile file first, then among the shipped files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from simpair import settings
from simpair.monitoring.policy import MonitorPolicy
from simpair.review.queue import ReviewPolicy
from simpair.selection.gate import GatePolicy
from simpair.selection.wise_rule import WiseFtPolicy
from simpair.training.reviews import ReviewUse

PROFILES = {"default": "configs/nightly.yaml", "smoke": "configs/nightly-smoke.yaml"}


class TaskPlan(BaseModel):
    """One registered model trained each night."""

    config: Path = Field(
        description="training config YAML: relative to the profile's folder, else to the project root"
    )
    evaluate: list[tuple[str, str]] = Field(description="(dataset, split) pairs the gate evaluates on")
    gate: GatePolicy
    jobs: int = Field(
        1,
        ge=1,
        description="stack configs: members trained at once, each in its own process with cores/jobs "
        "threads (CPU; on one GPU keep 1)",
    )
    wise_ft: WiseFtPolicy | None = Field(
        None,
        description="after training, register the WiSE-FT interpolation toward the backbone that this "
        "rule picks on dev and choice canaries (simpair.selection.wise_path); null: the plain fine-tune",
    )
    reviews: ReviewUse | None = Field(
        None,
        description="`{train: true, traffic_split: true}`: train also on the reviewed uncertain and disputed "
        "pairs, and gate on the reviewed random ones (the `traffic` split, gate.traffic) "
        "(simpair.training.reviews); null: reviews unused",
    )

    @model_validator(mode="after")
    def _beside_the_profile(self, info: ValidationInfo) -> TaskPlan:
        """A relative `config` that lies beside the profile file (`load_profile` passes its folder) is
        that file, made absolute so it stays so through a copy of the profile; otherwise it names a
        shipped file (`configs/smoke-paraphrase.yaml`, checkout or installed; `config_path`)."""
        folder = info.context.get("profile_dir") if info.context else None
        if folder is not None and not self.config.is_absolute() and (Path(folder) / self.config).is_file():
            self.config = Path(folder) / self.config
        return self

    def config_path(self) -> Path:
        return settings.shipped_path(self.config)


class Retries(BaseModel):
    """Retry policy for transient failures (I/O, tracking server unreachable); delays grow per attempt."""

    attempts: int = Field(3, ge=0)
    delays_seconds: list[float] = Field(default_factory=lambda: [10.0, 60.0, 300.0])


class ScoringHandoff(BaseModel):
    """What the night hands to the `nightly-score` flow (which reads it from the same profile)."""

    rescore_days_after_promotion: int = Field(
        0,
        ge=0,
        description="N > 0: the first scoring run after a new champion (a promotion, or a rollback) "
        "also scores again, with it, the batches first scored in the last N days; 0: off",
    )


class DispatchPlan(BaseModel):
    """Where each task's pre-tokenize -> train -> evaluate runs, and what the night does when no
    worker of the pool takes a run (a gpu worker that is down would otherwise hold the night for good)."""

    mode: Literal["local", "pool"] = Field(
        "local",
        description="`local` in the night's own process (no server needed), `pool` as a run of the "
        "`train-and-evaluate/gpu` deployment on the gpu work pool, the night waiting for it",
    )
    pending_timeout: float = Field(
        900.0,
        gt=0,
        description="pool: seconds (or `90s`, `15m`, `1h`) a dispatched run may wait for a worker to "
        "start it; then the night cancels it and fails with one line naming the pool (default 15 min)",
    )
    fallback: Literal["none", "cpu"] = Field(
        "none",
        description="pool: `cpu` trains a task that no worker took within pending_timeout in the "
        "night's own process on the cpu pool instead, and the night's summary says so",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        """`dispatch: pool` (and the flow's `dispatch` parameter) name the mode alone."""
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("pending_timeout", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        if isinstance(value, str):
            number, unit = value.strip()[:-1], value.strip()[-1:]
            if unit in ("s", "m", "h") and number.replace(".", "", 1).strip().isdigit():
                return float(number) * {"s": 1, "m": 60, "h": 3600}[unit]
        return value


class NotifyPlan(BaseModel):
    """Where the deployed nights report a failed, crashed or late run (ops/notifications.py). Read
    when the deployments are applied; SIMPAIR_NOTIFY_WEBHOOK / SIMPAIR_NOTIFY_BLOCK in that
    environment win, so a secret URL can stay out of the profile."""

    webhook: str | None = Field(
        None, description="http(s) URL that gets a JSON POST per failure (a Slack-style incoming webhook)"
    )
    block: str | None = Field(
        None, description="TYPE/NAME of a saved Prefect notification block, e.g. `slack-webhook/alerts`"
    )

    @field_validator("webhook")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> NotifyPlan:
        if self.webhook and self.block:
            raise ValueError("set notify.webhook or notify.block, not both")
        return self


class NightlyProfile(BaseModel):
    """A nightly profile file, validated (errors name the file and the field)."""

    name: str
    tasks: dict[str, TaskPlan]
    retries: Retries = Field(default_factory=Retries)
    lock_wait_seconds: float = Field(0.0, ge=0.0, description="0: a second run exits at once with a message")
    expected_minutes: float | None = None
    dispatch: DispatchPlan = Field(
        default_factory=DispatchPlan,
        description="where each task trains and how long the night waits for a worker (`dispatch: pool` "
        "is short for `dispatch: {mode: pool}`)",
    )
    scoring: ScoringHandoff = Field(default_factory=ScoringHandoff)
    review: ReviewPolicy | None = Field(
        None,
        description="the review queue each scoring run writes (`<out>/_review/<run_id>/`): sizes of the "
        "uncertain, disputed and random queues, seed (simpair.review.queue); null: no queue",
    )
    monitor: MonitorPolicy = Field(
        default_factory=MonitorPolicy,
        description="drift and health checks: each registered version gets a reference profile, each "
        "scoring run a traffic profile compared with it and the last nights (simpair.monitoring.policy)",
    )
    notify: NotifyPlan = Field(
        default_factory=NotifyPlan,
        description="failure notifications of the deployed nights: `{webhook: URL}` or `{block: TYPE/NAME}`",
    )
    pool_deployment: str = Field(
        "train-and-evaluate/gpu", description="dispatch: pool, the deployment each task runs as"
    )
    lost_after_seconds: float = Field(
        300.0,
        gt=0,
        description="dispatch: pool, a running training with no heartbeat in the shared home for this "
        "long is lost (worker killed, machine gone): marked Crashed and retried",
    )

    @model_validator(mode="after")
    def _known_tasks(self) -> NightlyProfile:
        unknown = set(self.tasks) - {"paraphrase", "sts"}
        if unknown:
            raise ValueError(f"unknown task(s) {sorted(unknown)}; expected paraphrase and/or sts")
        return self

    @model_validator(mode="after")
    def _jobs_need_a_stack(self) -> NightlyProfile:
        """`jobs` > 1 on a single training config would be silently ignored: say so instead."""
        from simpair.ensemble import is_stack_config

        for name, plan in self.tasks.items():
            path = plan.config_path()
            if plan.jobs > 1 and path.is_file() and not is_stack_config(path):
                raise ValueError(
                    f"tasks.{name}.jobs is {plan.jobs}, but {plan.config} trains one model; jobs trains "
                    "the members of a stack config side by side (use 1, or point config at a stack)"
                )
        return self

    @model_validator(mode="after")
    def _wise_ft_needs_one_encoder(self) -> NightlyProfile:
        """WiSE-FT interpolates one encoder: a stack of several models would fail after hours of training."""
        from simpair.ensemble import StackConfig, is_stack_config

        for name, plan in self.tasks.items():
            path = plan.config_path()
            stacked = plan.wise_ft and path.is_file() and is_stack_config(path)
            if stacked and StackConfig.from_yaml(path).combine == "stack":
                raise ValueError(
                    f"tasks.{name}.wise_ft: {plan.config} stacks several models; WiSE-FT interpolates "
                    "one encoder (a soup or a single model); drop wise_ft for this task"
                )
        return self


def load_profile(profile: str | Path) -> NightlyProfile:
    """`default`, `smoke`, or a path to a profile YAML."""
    path = Path(PROFILES.get(str(profile), str(profile)))
    if not path.is_absolute() and not (str(profile) not in PROFILES and path.is_file()):
        path = settings.shipped_path(path)  # named profiles and project-relative paths
    if not path.is_file():
        raise FileNotFoundError(f"nightly profile {profile!r}: no file {path} (known: {sorted(PROFILES)})")
    try:
        return NightlyProfile.model_validate(
            yaml.safe_load(path.read_text()), context={"profile_dir": path.resolve().parent}
        )
    except Exception as exc:
        raise ValueError(f"{path}: invalid nightly profile: {exc}") from exc
