"""Objective registry: a config names its objective (`objective: cosent`), this finds the class.

Every objective is an `nn.Module` whose `forward(outputs, targets)` returns a scalar loss, where
`outputs` is a tensor of logits (B,) for cross-encoders or a pair of embeddings `(u, v)` for
bi-encoders, and `targets` is a float tensor (B,) of 0/1 labels or 0-1 scores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

OBJECTIVES: dict[str, type[nn.Module]] = {}


def register_objective(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator: make an objective constructible by name."""

    def wrap(cls: type[nn.Module]) -> type[nn.Module]:
        if name in OBJECTIVES:
            raise ValueError(f"objective {name!r} registered twice")
        cls.name = name  # type: ignore[attr-defined]
        OBJECTIVES[name] = cls
        return cls

    return wrap


def objective_kind(name: str) -> str:
    """'cross' or 'bi': which model family the objective trains."""
    return get_objective_class(name).kind  # type: ignore[attr-defined,no-any-return]


def get_objective_class(name: str) -> type[nn.Module]:
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; known: {sorted(OBJECTIVES)}") from None


def build_objective(name: str, hidden_size: int | None = None, **params: Any) -> nn.Module:
    """Instantiate an objective by name; `hidden_size` is passed to objectives with a trainable head."""
    cls = get_objective_class(name)
    if getattr(cls, "needs_hidden_size", False):
        if hidden_size is None:
            raise ValueError(f"objective {name!r} needs the encoder's hidden size")
        params["hidden_size"] = hidden_size
    return cls(**params)
