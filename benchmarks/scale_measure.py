"""How `benchmarks/scale.py` measures a step: a fresh process's wall time, CPU time and peak RSS.

Also the machine it ran on, and the least-squares line of each cost against rows.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PYTHON = str(REPO / ".venv" / "bin" / "python")
EXTRAPOLATE_ROWS = 100_000_000
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PYTHONUNBUFFERED": "1",
}

# Launched by this (large) process, a child would start with its peak RSS: Linux carries the peak over
# fork and exec. So each step runs under this small wrapper, which reports its own child's usage.
WRAPPER = """
import json, resource, subprocess, sys, time
began = time.perf_counter()
rc = subprocess.call(sys.argv[2:])
wall = time.perf_counter() - began
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(json.dumps({"rc": rc, "wall_s": wall, "cpu_s": u.ru_utime + u.ru_stime,
                                         "peak_rss_kib": u.ru_maxrss}))
"""


def _load_average() -> float | None:
    """The 1-minute load average: near 0 on an idle machine, so a reader can tell a shared one."""
    path = Path("/proc/loadavg")
    return float(path.read_text().split()[0]) if path.exists() else None


def measure(cmd: list[str], log: Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `cmd` in a fresh process; its wall time, CPU time (user + sys) and peak RSS (with children).

    The working directory is the log's folder, not the checkout, so `python -c` imports simpair from
    the installed tree or from PYTHONPATH (the baseline), never from the current directory by accident.
    """
    env = {**os.environ, **ENV, **(extra_env or {})}
    usage_file = log.with_suffix(".usage.json")
    with log.open("w") as out:
        subprocess.run([PYTHON, "-c", WRAPPER, str(usage_file), *cmd], stdout=out, stderr=subprocess.STDOUT,
                       env=env, cwd=log.parent, check=False)  # fmt: skip
    usage = json.loads(usage_file.read_text())
    result = {
        "wall_s": round(usage["wall_s"], 3),
        "cpu_s": round(usage["cpu_s"], 3),
        "peak_rss_mb": round(usage["peak_rss_kib"] / 1024, 1),  # Linux: KiB
        "rc": usage["rc"],
        "log": str(log),
    }
    if usage["rc"] != 0:
        result["tail"] = log.read_text(errors="replace")[-1500:]
    return result


def machine() -> dict[str, Any]:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    cpu = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    mem = Path("/proc/meminfo").read_text().split()[1] if Path("/proc/meminfo").exists() else "0"
    versions = {}
    for name in ("polars", "pyarrow", "torch", "transformers", "tokenizers", "numpy"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            versions[name] = None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "simpair", "cli"], cwd=REPO, capture_output=True
    )
    return {
        "cpu": cpu.replace("(R)", "").replace("(TM)", ""),
        "cores": os.cpu_count(),
        "ram_gb": round(int(mem) / 1024**2, 1),
        "python": platform.python_version(),
        "versions": versions,
        "load_at_start": _load_average(),
        "commit": commit.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else ""),
    }


def fit(sizes: dict[str, Any]) -> dict[str, Any]:
    """Least-squares line of wall time, CPU and peak RSS against rows, per step, and its value at 100M."""
    fits: dict[str, Any] = {}
    names = {n for s in sizes.values() for n in s["steps"]}
    for name in sorted(names):
        pts = [
            (s["rows"], s["steps"][name]) for s in sizes.values() if s["steps"].get(name, {}).get("rc") == 0
        ]
        if len(pts) < 2:
            continue
        x = np.array([[1.0, rows] for rows, _ in pts])
        fits[name] = {"sizes": len(pts)}
        for key, unit in (("wall_s", 1.0), ("cpu_s", 1.0), ("peak_rss_mb", 1024.0**2)):
            (c0, c1), *_ = np.linalg.lstsq(x, np.array([r[key] for _, r in pts]), rcond=None)
            fits[name][key] = {"intercept": round(float(c0), 3), "per_row": float(c1) * unit,
                               "at_100M": round(float(c0 + c1 * EXTRAPOLATE_ROWS), 1)}  # fmt: skip
    return fits
