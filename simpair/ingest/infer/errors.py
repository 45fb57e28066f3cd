"""The one error contract inference raises, apart from the modules that raise it so none imports another."""

from __future__ import annotations


class InferError(ValueError):
    """A file no contract can be proposed for (missing, empty, binary, undecodable); names the file."""
