"""Prefect deployments of both nights on work pools `cpu` and `gpu`: schedules, trigger, one run at a time.

- `nightly-retrain/nightly` runs the whole night on the `cpu` pool at 02:00 UTC, at most one at a
  time (`concurrency_limit=1`, later runs ENQUEUE behind a running one; the per-home file lock in the
  flow is the second guard). With the profile's `dispatch: pool` (or the `dispatch` parameter) each
  task's training runs as a run of `train-and-evaluate/gpu`, which the night waits for.
- `nightly-score/nightly` scores the inbox into the output folder with the paraphrase champion on the
  `cpu` pool, on its own cron (06:00 UTC) AND whenever a `nightly-retrain` flow run completes (a
  deployment trigger on `prefect.flow-run.Completed`), so a new champion scores the same night. One
  run at a time; scoring is idempotent (each batch once), so an extra run only finds nothing new.
- `train-and-evaluate/gpu` is the GPU half (pre-tokenize, train, evaluate; tasks tagged `gpu`) on the
  `gpu` pool. Only `task_name` is required (`paraphrase` or `sts`); the config, evaluation splits,
  retries and `jobs` default to that task in the `profile` parameter (default `default`).

Usage (PREFECT_API_URL must point at a real Prefect server: `make stack-up`, or infra/README.md):
    python -m simpair.flows.deployments apply     # register the three deployments, the trigger, the
                                                  # failure notification (ops/notifications.py) and
                                                  # the crash detection of dispatched runs
    python -m simpair.flows.deployments apply --profile smoke   # the night runs that profile; its
                                                  # `notify:` section is the notification target
    prefect worker start --pool cpu --type process   # on CPU machines
    prefect worker start --pool gpu --type process   # on GPU machines
    python -m simpair.flows.deployments serve     # one machine, no workers: this process runs them all
With `SIMPAIR_APPLY_POOL_WAIT_SECONDS=N`, apply first waits up to N s for the work pools to exist (a
worker's first start creates its pool), so `make stack-up` starts the workers and the apply side by side.
The temporary API Prefect starts when PREFECT_API_URL is unset runs no scheduler and no late-runs
service (its trigger and action services run, but stop with the process that started it), so `serve`
refuses to start without a server.
"""

from __future__ import annotations

import os
import sys
import time

from prefect import serve
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.deployments.runner import EntrypointType, RunnerDeployment
from prefect.events import DeploymentEventTrigger
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron

from simpair import settings
from simpair.flows.nightly_retrain import nightly_retrain, train_and_evaluate
from simpair.flows.nightly_score import nightly_score
from simpair.ops.notifications import apply_notifications
from simpair.ops.pool_dispatch import CRASH_AUTOMATION, ensure_crash_detection
from simpair.runtime.model_ref import DEFAULT_MODEL

NIGHTLY_CRON = "0 2 * * *"
SCORE_CRON = "0 6 * * *"
TIMEZONE = "UTC"
CPU_POOL = "cpu"
GPU_POOL = "gpu"
RETRAIN_FLOW = "nightly-retrain"
GPU_DEPLOYMENT = "train-and-evaluate/gpu"
POOL_WAIT_ENV = "SIMPAIR_APPLY_POOL_WAIT_SECONDS"
NO_SERVER = (
    "PREFECT_API_URL is not set: Prefect's temporary local API runs no scheduler and stops with this "
    "process, so no cron would ever fire. Start a server first (`make stack-up`, then "
    "`source .simpair/stack/env`, or see infra/README.md) or run a night now with `simpair nightly`."
)


def _one_at_a_time() -> ConcurrencyLimitConfig:
    return ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE)


def nightly_deployment(
    work_pool: str | None = CPU_POOL, profile: str = "default", dispatch: str | None = None
) -> RunnerDeployment:
    """The scheduled night; one run at a time, later ones queue."""
    parameters: dict[str, object] = {"profile": profile, "force": False}
    if dispatch is not None:
        parameters["dispatch"] = dispatch
    return nightly_retrain.to_deployment(
        name="nightly",
        schedule=Cron(NIGHTLY_CRON, timezone=TIMEZONE),
        parameters=parameters,
        concurrency_limit=_one_at_a_time(),
        work_pool_name=work_pool,
        entrypoint_type=EntrypointType.MODULE_PATH,
        tags=["nightly", "retrain"],
        description="ingest -> pre-tokenize -> train -> evaluate -> register -> promotion gate",
    )


def score_deployment(
    work_pool: str | None = CPU_POOL,
    inbox: str | None = None,
    out: str | None = None,
    model: str | None = None,
) -> RunnerDeployment:
    """Nightly scoring: on its cron and after every completed retrain night. `inbox` and `out`
    default to `$SIMPAIR_INBOX` / `$SIMPAIR_SCORED`, else `<home>/inbox` and `<home>/scoring`;
    `model` to `$SIMPAIR_SCORE_MODEL`, else the paraphrase champion."""
    home = settings.home_dir()
    return nightly_score.to_deployment(
        name="nightly",
        schedule=Cron(SCORE_CRON, timezone=TIMEZONE),
        parameters={
            "inbox": inbox or os.environ.get("SIMPAIR_INBOX") or str(home / "inbox"),
            "out": out or os.environ.get("SIMPAIR_SCORED") or str(home / "scoring"),
            "model": model or os.environ.get("SIMPAIR_SCORE_MODEL") or DEFAULT_MODEL,
        },
        triggers=[retrain_completed()],
        concurrency_limit=_one_at_a_time(),
        work_pool_name=work_pool,
        entrypoint_type=EntrypointType.MODULE_PATH,
        tags=["nightly", "score"],
        description="score every new inbox batch once with the champion, after each retrain night",
    )


def retrain_completed() -> DeploymentEventTrigger:
    """Fires when any `nightly-retrain` flow run completes (trained or skipped)."""
    return DeploymentEventTrigger(
        name="nightly-score after nightly-retrain",
        expect={"prefect.flow-run.Completed"},
        match_related={"prefect.resource.role": "flow", "prefect.resource.name": RETRAIN_FLOW},
    )


def gpu_deployment(work_pool: str | None = GPU_POOL) -> RunnerDeployment:
    """Train and evaluate one task on a GPU worker (`task_name` required; the rest from `profile`)."""
    return train_and_evaluate.to_deployment(
        name="gpu",
        parameters={"profile": "default"},
        work_pool_name=work_pool,
        entrypoint_type=EntrypointType.MODULE_PATH,
        tags=["gpu", "training"],
        description="pre-tokenize, train and evaluate one task (tasks tagged gpu)",
    )


def all_deployments(work_pools: bool = True, profile: str = "default") -> list[RunnerDeployment]:
    if work_pools:
        return [nightly_deployment(profile=profile), score_deployment(), gpu_deployment()]
    return [nightly_deployment(None, profile=profile), score_deployment(None), gpu_deployment(None)]


def wait_for_pools(pools: list[str], seconds: float) -> None:
    """Return once every pool exists, or after `seconds` (the apply then fails with Prefect's own
    "Work pool ... not found"): workers create their pools on first start, and waiting here lets the
    apply import its flows while they start."""
    deadline = time.monotonic() + seconds
    with get_client(sync_client=True) as client:
        for pool in pools:
            while True:
                try:
                    client.read_work_pool(pool)
                    break
                except ObjectNotFound:
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.5)


def api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


def main(argv: list[str]) -> None:
    command = argv[0] if argv else "apply"
    profile = "default"
    if argv[1:2] == ["--profile"] and len(argv) == 3:
        profile = argv[2]
    elif len(argv) > 1:
        command = "?"
    if command not in ("apply", "serve"):
        raise SystemExit(
            f"usage: python -m simpair.flows.deployments [apply|serve] [--profile NAME|PATH], got {argv}"
        )
    url = api_url()
    if url is None:
        raise SystemExit(f"{command}: {NO_SERVER}")
    if command == "apply":
        deployments = all_deployments(profile=profile)
        if wait := float(os.environ.get(POOL_WAIT_ENV) or 0):
            wait_for_pools(sorted({d.work_pool_name for d in deployments if d.work_pool_name}), wait)
        for deployment in deployments:
            deployment_id = deployment.apply()
            print(
                f"applied {deployment.flow_name}/{deployment.name} on pool {deployment.work_pool_name}: "
                f"{deployment_id}"
            )
        print(apply_notifications(profile=profile))
        ensure_crash_detection()  # the first `dispatch: pool` night makes it too; here it exists at once
        print(f"crash detection: automation {CRASH_AUTOMATION!r}")
        print(f"on {url}")
    else:
        print(apply_notifications(profile=profile))
        serve(*all_deployments(work_pools=False, profile=profile))


if __name__ == "__main__":
    main(sys.argv[1:])
