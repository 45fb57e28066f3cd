"""Which terminal line a training's progress bar owns when several train side by side.

Trainings in parallel processes would otherwise draw their bars over one another on one line.
Whoever starts the processes gives each a slot (0 .. jobs-1, never two running at once on one),
and the slot travels in the environment because the trainer runs in a worker process.
"""

from __future__ import annotations

import os

_VARIABLE = "SIMPAIR_PROGRESS_SLOT"


def claim_slot(slot: int) -> None:
    """Mark this process's trainings as drawing on line `slot` (call in the worker process)."""
    os.environ[_VARIABLE] = str(slot)


def current_slot() -> int | None:
    """The line this process's bars draw on, or None for the usual single bar."""
    value = os.environ.get(_VARIABLE)
    return int(value) if value and value.isdigit() else None
