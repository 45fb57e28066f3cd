"""How far a faster precision may move a model's dev decisions: one shape for every guard.

The precision ladder (`--precision auto`) and the int8 guard behind an explicit `--precision int8`
judge against the same two figures but with their own defaults and environment variables, so each
declares only those.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import ClassVar, Self


@dataclass(frozen=True)
class ParityLimits:
    """How far a rung may move the dev metric (absolute) and what share of dev labels it may flip."""

    max_delta: float
    max_flip_share: float
    env: ClassVar[tuple[str, str]]  # the environment variables for max_delta, max_flip_share

    @classmethod
    def from_env(cls) -> Self:
        """The class's defaults, or its two environment variables where set."""
        defaults = {f.name: f.default for f in fields(cls)}
        delta, flips = cls.env
        return cls(
            float(os.environ.get(delta, defaults["max_delta"])),
            float(os.environ.get(flips, defaults["max_flip_share"])),
        )
