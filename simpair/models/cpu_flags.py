"""The CPU's feature flags, read once from /proc/cpuinfo: light enough for a scoring run's first steps
(no torch), shared by the device facts a verdict records and the int8 recipe a host builds."""

from __future__ import annotations

import functools


@functools.cache
def cpu_flag_set() -> set[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (Linux), or None where they cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None
