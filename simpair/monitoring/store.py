"""Where traffic profiles live: beside the scoring ledger, per model version and per run.

```
<out>/_monitor/<model>/<version>/<run_id>/profile.json   tonight's traffic (vectors.npy beside it)
<out>/_monitor/<model>/<version>/<run_id>/monitor.json   its drift report and PNGs
<out>/_monitor/<model>/<version>/reference/profile.json  the version's reference, copied at run time
```

Keyed by version, not by alias, so the nights of a version stay comparable after a promotion and a
new champion starts its own history. API: `run_dir`, `save_traffic`, `save_reference`,
`load_reference`, `history(out, model, version, since)`, `runs(out, model)`, `latest_run`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from simpair.monitoring.profile import PROFILE_FILE, Profile

MONITOR_DIR = "_monitor"
REFERENCE = "reference"


def safe_name(name: str | None) -> str:
    """A model name or version as one folder name (a model folder's path becomes its last parts)."""
    text = str(name) if name not in (None, "") else "unnamed"
    return re.sub(r"[^A-Za-z0-9._@+-]+", "_", text).strip("._") or "unnamed"


def version_dir(out: str | Path, model: str | None, version: str | None) -> Path:
    return Path(out) / MONITOR_DIR / safe_name(model) / safe_name(version)


def run_dir(out: str | Path, model: str | None, version: str | None, run_id: str) -> Path:
    return version_dir(out, model, version) / safe_name(run_id)


def save_traffic(profile: Profile, out: str | Path) -> Path:
    """Tonight's traffic profile under its run's folder (needs `profile.run_id`); returns the folder."""
    if profile.kind != "traffic" or not profile.run_id:
        raise ValueError("only a traffic profile with its run_id is stored per run")
    folder = run_dir(out, profile.model, profile.version, profile.run_id)
    profile.save(folder)
    return folder


def save_reference(
    profile: Profile, out: str | Path, model: str | None = None, version: str | None = None
) -> Path:
    """A copy of the version's reference beside its traffic, so `simpair monitor` needs no registry."""
    folder = version_dir(out, model or profile.model, version or profile.version) / REFERENCE
    profile.save(folder)
    return folder


def load_reference(out: str | Path, model: str | None, version: str | None) -> Profile | None:
    folder = version_dir(out, model, version) / REFERENCE
    return Profile.load(folder) if (folder / PROFILE_FILE).exists() else None


@dataclass(frozen=True)
class StoredRun:
    """One stored traffic profile: the folder names and the profile's own time."""

    model: str
    version: str
    run_id: str
    folder: Path
    created: datetime


def runs(out: str | Path, model: str | None = None) -> list[StoredRun]:
    """Every stored traffic profile under `out` (of one model when named), oldest first.

    Reads only each profile's header line set (the JSON), never the vectors. An unreadable profile is
    skipped here and reported by whoever loads it.
    """
    root = Path(out) / MONITOR_DIR
    if not root.is_dir():
        return []
    found = []
    for path in root.glob(f"{safe_name(model) if model else '*'}/*/*/{PROFILE_FILE}"):
        folder = path.parent
        if folder.name == REFERENCE:
            continue
        try:
            created = Profile.model_validate_json(path.read_text(encoding="utf-8")).created
        except (OSError, ValueError):
            continue
        found.append(StoredRun(folder.parent.parent.name, folder.parent.name, folder.name, folder, created))
    return sorted(found, key=lambda r: (r.created, r.run_id))


def latest_run(out: str | Path, model: str | None = None) -> StoredRun | None:
    found = runs(out, model)
    return found[-1] if found else None


def history(
    out: str | Path,
    model: str | None,
    version: str | None,
    since: timedelta | None = None,
    *,
    last: int | None = None,
    now: datetime | None = None,
) -> list[Profile]:
    """The stored traffic profiles of one model version, oldest first: those newer than `since` ago,
    the newest `last` of them when given. Vectors are read only for the profiles returned; a damaged
    profile is skipped with a line on stderr naming it."""
    folder = version_dir(out, model, version)
    if not folder.is_dir():
        return []
    cutoff = None if since is None else (now or datetime.now(UTC)) - since
    headers = []
    for path in folder.glob(f"*/{PROFILE_FILE}"):
        if path.parent.name == REFERENCE:
            continue
        try:
            head = Profile.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # one damaged night must not stop tonight's check
            print(f"monitor: skipped {path}: not a readable monitoring profile ({exc})", file=sys.stderr)
            continue
        if cutoff is None or head.created >= cutoff:
            headers.append((head.created, head.run_id or "", path.parent))
    headers.sort()
    if last is not None:
        headers = headers[-last:] if last > 0 else []
    profiles = []
    for _, _, run in headers:
        try:  # its header read, its vector file may still be damaged
            profiles.append(Profile.load(run))
        except ValueError as exc:
            print(f"monitor: skipped {exc}", file=sys.stderr)
    return profiles


def parse_since(text: str) -> timedelta:
    """`30d`, `12h`, `90m` or `2w` as a timedelta (a clear error otherwise)."""
    match = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", text or "")
    if not match:
        raise ValueError(f"--since {text!r}: give a number and a unit, e.g. 30d, 12h, 90m, 2w")
    n, unit = int(match.group(1)), match.group(2)
    return {
        "m": timedelta(minutes=n),
        "h": timedelta(hours=n),
        "d": timedelta(days=n),
        "w": timedelta(weeks=n),
    }[unit]
