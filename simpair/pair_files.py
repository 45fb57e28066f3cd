"""Read a user's pairs file (Parquet, CSV or TSV by suffix) into one frame, or fail naming the file.

Shared by `evaluate --file` (where `PairsFileError` is `FileEvalError`) and a cascade's band pool: both
read files users bring, where one clear line naming the file beats a polars traceback, and STS-style
TSVs hold unbalanced quotes that must stay text.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl


class PairsFileError(ValueError):
    """A pairs file that cannot be used as asked; `option` names the command-line option to fix."""

    def __init__(self, message: str, option: str = "--file") -> None:
        super().__init__(message)
        self.option = option


def read_pairs_file(path: Path) -> pl.DataFrame:
    """Parquet, CSV or TSV by suffix; any reader failure becomes one error that names the file."""
    if not path.exists():
        raise PairsFileError(f"{path}: no such file")
    if path.is_dir():
        raise PairsFileError(f"{path}: a folder, expected a .parquet, .csv or .tsv file")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path)
        if suffix == ".csv":
            return pl.read_csv(path, infer_schema_length=None)
        if suffix in (".tsv", ".tab"):
            # STS-style TSVs hold unbalanced quotes inside sentences: read them as plain characters
            return pl.read_csv(path, separator="\t", quote_char=None, infer_schema_length=None)
    except Exception as exc:  # polars raises ComputeError/NoDataError/...: the user needs the file named
        raise PairsFileError(
            f"{path}: not a readable {suffix[1:]} file: {type(exc).__name__}: {exc}"
        ) from exc
    raise PairsFileError(f"{path}: unknown file type {suffix or '(no suffix)'!r}; use .parquet, .csv or .tsv")
