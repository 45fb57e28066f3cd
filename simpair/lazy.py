"""Package names that import their module on first use (PEP 562's module `__getattr__`).

`simpair.models`, `simpair.training`, `simpair.ensemble` and `simpair.ingest` name their main classes
and functions at the package, but importing the package must stay light: a process that reads only a
model's `simpair.json` or a nightly profile must not pay for torch, transformers and scikit-learn.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` for `package`: `exports[name]` is the module that defines `name`."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    return __getattr__
