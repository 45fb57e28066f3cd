"""CLI commands for the score stage."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
