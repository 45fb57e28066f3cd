"""Champion history: who was champion when, and why, so `simpair rollback` needs no memory of its own.

The history is a JSON list in the registered model's tag `champion_history`. Each entry is one alias
move: a promotion pushes a version, a rollback pops the top one. Replaying the entries gives the stack of
champions; the one under the top is where a rollback goes. Stored in the registry itself, the history
travels with the models when the tracking server moves.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

HISTORY_TAG = "champion_history"
MAX_ENTRIES = 40  # tag values are size-limited (5000 chars); old entries are dropped, oldest first

Action = Literal["promote", "rollback"]


class HistoryEntry(BaseModel):
    """One move of the `champion` alias."""

    action: Action
    version: str
    previous: str | None = None
    reason: str = ""
    by: str = "gate"
    at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))


def parse(raw: str | None) -> list[HistoryEntry]:
    """Entries from the tag value; a missing tag is an empty history."""
    if not raw:
        return []
    return [HistoryEntry.model_validate(item) for item in json.loads(raw)]


def dump(entries: list[HistoryEntry]) -> str:
    """Tag value for the entries, keeping the newest MAX_ENTRIES and shortening long reasons."""
    kept = entries[-MAX_ENTRIES:]
    items = [e.model_dump() | {"reason": e.reason[:200]} for e in kept]
    text = json.dumps(items, separators=(",", ":"))
    while len(text) > 4900 and len(items) > 1:
        items = items[1:]
        text = json.dumps(items, separators=(",", ":"))
    return text


def champion_stack(entries: list[HistoryEntry]) -> list[str]:
    """Replay the history: promotions push a version, rollbacks pop the current one."""
    stack: list[str] = []
    for entry in entries:
        if entry.action == "promote":
            stack.append(entry.version)
        elif stack:
            stack.pop()
            if not stack or stack[-1] != entry.version:
                stack.append(entry.version)  # history was truncated: trust the recorded target
    return stack


def rollback_target(entries: list[HistoryEntry], current: str | None) -> str:
    """The version a rollback should restore; ValueError when there is no earlier champion."""
    stack = champion_stack(entries)
    if current is not None and stack and stack[-1] != current:
        # the alias was moved outside simpair: the recorded top is the best previous candidate
        return stack[-1]
    if len(stack) < 2:
        raise ValueError("no previous champion recorded in the champion_history tag: nothing to roll back to")
    return stack[-2]
