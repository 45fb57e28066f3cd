"""Prefect deployments for the nightly retrain: a cron schedule, work pools `cpu` and `gpu`.

- `nightly-retrain/nightly` runs the whole night on the `cpu` pool at 02:00 UTC, at most one at a
  time (`concurrency_limit=1`, later runs ENQUEUE behind a running one; the per-home file lock in the
  flow is the second guard).
- `train-and-evaluate/gpu` is the GPU half (pre-tokenize, train, evaluate; tasks tagged `gpu`) on
  the `gpu` pool, for running one task's training on a GPU worker by hand or from automation.
  The nightly flow itself calls it as an in-process subflow (see docs/nightly.md for the limits).

Usage (with PREFECT_API_URL pointing at a Prefect server, see infra/README.md):
    python -m simpair.flows.deployments apply            # register both deployments on the server
    prefect worker start --pool cpu               # on CPU machines (process workers)
    prefect worker start --pool gpu               # on GPU machines
    python -m simpair.flows.deployments serve             # single machine: schedule + run in this process
"""

from __future__ import annotations

import sys

from prefect import serve
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.deployments.runner import RunnerDeployment

from simpair.flows.nightly_retrain import nightly_retrain, train_and_evaluate

NIGHTLY_CRON = "0 2 * * *"
TIMEZONE = "UTC"
CPU_POOL = "cpu"
GPU_POOL = "gpu"


def nightly_deployment(work_pool: str | None = CPU_POOL) -> RunnerDeployment:
    """The scheduled night (default profile); one run at a time, later ones queue."""
    return nightly_retrain.to_deployment(
        name="nightly",
        cron=NIGHTLY_CRON,
        parameters={"profile": "default", "force": False},
        concurrency_limit=ConcurrencyLimitConfig(
            limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE
        ),
        work_pool_name=work_pool,
        tags=["nightly", "retrain"],
        description="ingest -> pre-tokenize -> train -> evaluate -> register -> promotion gate",
    )


def gpu_deployment(work_pool: str | None = GPU_POOL) -> RunnerDeployment:
    """Train and evaluate one task on a GPU worker."""
    return train_and_evaluate.to_deployment(
        name="gpu",
        work_pool_name=work_pool,
        tags=["gpu", "training"],
        description="pre-tokenize, train and evaluate one task (tasks tagged gpu)",
    )


def main(argv: list[str]) -> None:
    command = argv[0] if argv else "apply"
    if command == "apply":
        for deployment in (nightly_deployment(), gpu_deployment()):
            print(f"applied {deployment.name}: {deployment.apply()}")
    elif command == "serve":
        serve(nightly_deployment(work_pool=None))
    else:
        raise SystemExit(f"usage: python -m simpair.flows.deployments [apply|serve], got {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
