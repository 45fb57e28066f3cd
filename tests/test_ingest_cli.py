"""`simpair ingest` as a user types it (installed entry point, real files, no Prefect server)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _simpair(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("simpair", path=str(Path(sys.executable).parent)) or "simpair"
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def test_cli_ingests_defaults_then_reports_nothing_changed(home: Path, shared_data: Path) -> None:
    env = {**os.environ, "SIMPAIR_HOME": str(home), "SIMPAIR_SOURCES": str(shared_data), "COLUMNS": "200"}
    first = _simpair("ingest", "--no-prefect", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    out = first.stdout
    assert "│ msrp    │ train (train) │" in out and "│ 4076    │ 4076  │ 0 " in out
    # STS-B train repeats 57 pairs (43 exact, 14 swapped); 13 of those pairs carry another score in a copy,
    # so all 31 of their copies are quarantined and 39 plain repeats remain
    assert "duplicate 39" in out and "conflicting_duplicate 31" in out
    assert "stsb: pairs whose copies carry different labels: 13 in train, 1 in test" in out
    assert "mojibake_fixes 40" in out
    assert "│ 498 " in out  # MSRP test pairs inside STS-B train
    second = _simpair("ingest", "--no-prefect", env=env)
    assert second.returncode == 0
    assert "nothing changed" in second.stdout and "unchanged" in second.stdout
