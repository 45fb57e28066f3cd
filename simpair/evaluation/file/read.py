"""Read a user's pairs file (Parquet, CSV or TSV by suffix) into one frame, or fail naming the file.

`FileEvalError` is the one error every step of `evaluate --file` raises for a file it cannot use; its
`option` names the command-line option to fix, so the CLI prints one usage line and no traceback.
"""

from __future__ import annotations

from simpair.pair_files import PairsFileError as FileEvalError
from simpair.pair_files import read_pairs_file

__all__ = ["FileEvalError", "read_pairs_file"]
