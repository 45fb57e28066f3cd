"""Metrics per group of pairs (for example per source genre) inside one evaluated split.

Why: one number per split hides where a model wins and where it loses. STS-B dev holds 375
answers-forums pairs, a genre its train split lacks; on them the untouched backbone beats every
fine-tune, so dev rewarded backbone-like models that test did not (docs/experiments.md). Groups come
from the pair ids through a regular expression (its first capture group) because ingest keeps each
source's own ids: STS-B's `MSRpar-2012test-0001` gives `MSRpar` with `^(.+?)-\\d{4}`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

UNMATCHED = "(unmatched)"


def compile_group_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled pattern; a clear error for invalid ones or ones without a capture group."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"group pattern {pattern!r} is not a valid regular expression: {exc}") from exc
    if compiled.groups < 1:
        raise ValueError(f"group pattern {pattern!r} needs a capture group, e.g. '^(.+?)-\\d{{4}}'")
    return compiled


def pair_groups(pair_ids: Sequence[str], pattern: re.Pattern[str]) -> np.ndarray:
    """The first capture group of `pattern` searched in each pair id; UNMATCHED where it finds none."""
    out = []
    for pair_id in pair_ids:
        match = pattern.search(pair_id)
        out.append(match.group(1) if match and match.group(1) else UNMATCHED)
    return np.asarray(out, dtype=object)


def metrics_by_group(
    groups: np.ndarray, metrics: Callable[[np.ndarray], dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`metrics(mask)` for each group, groups sorted by name (UNMATCHED last)."""
    names = sorted(set(groups.tolist()), key=lambda g: (g == UNMATCHED, g))
    return {name: metrics(groups == name) for name in names}
