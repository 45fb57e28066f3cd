"""A migrated Prefect SQLite database, built once per test run and copied for each temporary API.

A temporary API started on an empty database migrates it and registers Prefect's block types first:
about 10 of its 16 CPU seconds on 2 cores (2026-11-26). With four pytest workers each starting one,
the first worker to get here builds the database in its own process and every API starts from a copy.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from filelock import FileLock

TEMPLATE = "prefect-template.db"


def migrated_database(shared_dir: Path) -> Path:
    """The migrated database in `shared_dir` (a folder every pytest worker of this run sees)."""
    template = shared_dir / TEMPLATE
    with FileLock(str(template) + ".lock"):
        if not template.exists():
            building = template.with_suffix(".building")
            building.unlink(missing_ok=True)
            _migrate(building)
            building.replace(template)
    return template


def seeded_dir(template: Path, into: Path) -> Path:
    """`into` with a copy of the template under the name Prefect's test harness gives its database."""
    into.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, into / "prefect-test.db")
    return into


def _migrate(path: Path) -> None:
    from prefect.server.database import provide_database_interface
    from prefect.server.models.block_registration import run_block_auto_registration
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL, temporary_settings

    async def build() -> None:
        db = provide_database_interface()
        await db.create_db()
        async with await db.session() as session:
            await run_block_auto_registration(session=session)
            await session.commit()
        await (await db.engine()).dispose()  # closes SQLite, so nothing waits in a journal file

    with temporary_settings(updates={PREFECT_SERVER_DATABASE_CONNECTION_URL: f"sqlite+aiosqlite:///{path}"}):
        asyncio.run(build())
