"""The Prefect CLI's listing commands against a real Prefect API.

`prefect deployment ls`, `work-pool ls`, `flow-run ls` and `automation ls` are the first commands a team
types. Prefect's client sends `"limit": null` in their request bodies; from fastapi 0.151 on, the server
validates that null against `limit: int` and answers 422, so the pinned fastapi must stay below 0.151
(pyproject.toml, infra/constraints.txt). This runs the installed `prefect` binary, as a user would.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PREFECT = Path(sys.executable).with_name("prefect")


async def _create_objects(suffix: str) -> dict[str, str]:
    """A work pool, a deployment on it, a flow run of that deployment and an automation; their names."""
    from prefect.automations import Automation
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.events.actions import DoNothing
    from prefect.events.schemas.automations import EventTrigger

    names = {
        "pool": f"cli-pool-{suffix}",
        "flow": f"cli-flow-{suffix}",
        "deployment": f"cli-deploy-{suffix}",
        "flow_run": f"cli-run-{suffix}",
        "automation": f"cli-automation-{suffix}",
    }
    async with get_client() as client:
        await client.create_work_pool(WorkPoolCreate(name=names["pool"], type="process"))
        flow_id = await client.create_flow_from_name(names["flow"])
        deployment_id = await client.create_deployment(
            flow_id=flow_id, name=names["deployment"], work_pool_name=names["pool"], entrypoint="x.py:f"
        )
        await client.create_flow_run_from_deployment(deployment_id, name=names["flow_run"])
    await Automation(
        name=names["automation"],
        trigger=EventTrigger(expect={"cli.test.never"}, posture="Reactive", threshold=1),
        actions=[DoNothing()],
    ).acreate()
    return names


def _prefect(*args: str, api_url: str) -> subprocess.CompletedProcess[str]:
    # A wide terminal, so rich prints every name on one line.
    env = {**os.environ, "PREFECT_API_URL": api_url, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [str(PREFECT), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_listing_commands_exit_0_and_list_what_was_created(prefect_api: None) -> None:
    from prefect.settings import PREFECT_API_URL

    api_url = PREFECT_API_URL.value()
    assert api_url, "the prefect_api fixture sets PREFECT_API_URL for this process"
    names = asyncio.run(_create_objects(uuid.uuid4().hex[:8]))

    expected = {
        ("deployment", "ls"): f"{names['flow']}/{names['deployment']}",
        ("work-pool", "ls"): names["pool"],
        # the flow's own runs: a plain `flow-run ls` shows the 15 newest of the whole session's API
        ("flow-run", "ls", "--flow-name", names["flow"]): names["flow_run"],
        ("automation", "ls"): names["automation"],
    }
    # Four CLI processes side by side: each spends seconds importing Prefect.
    with ThreadPoolExecutor(max_workers=len(expected)) as pool:
        runs = {args: pool.submit(_prefect, *args, api_url=api_url) for args in expected}
        results = {args: run.result() for args, run in runs.items()}
    failures = []
    for args, name in expected.items():
        result = results[args]
        if result.returncode != 0 or name not in result.stdout:
            tail = (result.stderr.strip().splitlines() or [""])[-1][:400]
            failures.append(f"prefect {' '.join(args)}: exit {result.returncode}, {name!r} missing; {tail}")
    assert not failures, "\n".join(failures)
