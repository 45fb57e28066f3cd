"""Read a Parquet file of sentences for encoding or mining: check it, stream it, set bad rows aside.

Why its own module: `simpair encode` and `simpair mine` take the same input (a text column and an
optional id column) and must fail the same way on the same mistakes. A file that cannot be used at
all (empty, not Parquet, no such column) stops the command with one line naming the file or column;
a row that cannot be used (null or empty text) is kept aside with its row number and reason while
the rest go on, as scoring does with its rejects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from simpair.defaults import DEFAULT_SENTENCE_BATCH_ROWS as DEFAULT_BATCH_ROWS
from simpair.stages import step

REJECT_SCHEMA = pa.schema([("row", pa.int64()), ("id", pa.string()), ("reason", pa.string())])


class InputError(ValueError):
    """An input file that cannot be used at all (its message names the file, or the column)."""


@dataclass
class Rejects:
    """Rows set aside: row number in the file (0-based), id (or None) and why."""

    rows: list[int] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, row: int, id_: str | None, reason: str) -> None:
        self.rows.append(row)
        self.ids.append(id_)
        self.reasons.append(reason)

    def extend(self, other: Rejects) -> None:
        self.rows += other.rows
        self.ids += other.ids
        self.reasons += other.reasons

    def __len__(self) -> int:
        return len(self.rows)

    def table(self) -> pa.Table:
        return pa.table({"row": self.rows, "id": self.ids, "reason": self.reasons}, schema=REJECT_SCHEMA)


@dataclass
class Sentences:
    """The usable rows of a file: row numbers, ids (the id column as text, or the row number) and texts."""

    rows: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    rejects: Rejects = field(default_factory=Rejects)

    def extend(self, other: Sentences) -> None:
        self.rows += other.rows
        self.ids += other.ids
        self.texts += other.texts
        self.rejects.extend(other.rejects)

    def __len__(self) -> int:
        return len(self.texts)


def open_sentences(path: str | Path, column: str, id_column: str | None) -> pq.ParquetFile:
    """The Parquet file, checked: it exists, is Parquet, has rows and has the columns asked for."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file (0 bytes), expected Parquet with a {column!r} column")
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from exc
    names = parquet.schema_arrow.names
    for wanted, option in ((column, "--column"), (id_column, "--id-column")):
        if wanted is not None and wanted not in names:
            raise InputError(f"{path}: no column {wanted!r} ({option}); columns found: {', '.join(names)}")
    if parquet.metadata.num_rows == 0:
        raise InputError(f"{path}: empty file (no rows)")
    return parquet


def _split(start: int, texts: list[object], ids: list[object] | None) -> Sentences:
    """Usable rows of one batch, and the rejected ones with their reason."""
    out = Sentences()
    for offset, text in enumerate(texts):
        row = start + offset
        id_ = str(ids[offset]) if ids is not None and ids[offset] is not None else None
        if text is None:
            out.rejects.add(row, id_, "null text")
        elif not isinstance(text, str):
            out.rejects.add(row, id_, f"text is not a string ({type(text).__name__})")
        elif not text.strip():
            out.rejects.add(row, id_, "empty text")
        else:
            out.rows.append(row)
            out.ids.append(id_ if id_ is not None else str(row))
            out.texts.append(text)
    return out


def iter_sentences(
    path: str | Path, column: str = "text", id_column: str | None = None, batch_rows: int = DEFAULT_BATCH_ROWS
) -> Iterator[Sentences]:
    """The file in batches of at most `batch_rows` rows (bounded memory), each split into usable/rejected."""
    parquet = open_sentences(path, column, id_column)
    columns = [column] if id_column is None else [column, id_column]
    start = 0
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=columns):
        texts = batch.column(column).to_pylist()
        ids = batch.column(id_column).to_pylist() if id_column is not None else None
        yield _split(start, texts, ids)
        start += batch.num_rows


@step("read-sentences", run_name="read-{path}")
def read_sentences(path: str | Path, column: str = "text", id_column: str | None = None) -> Sentences:
    """The whole file (texts only: mining needs every sentence; their vectors are what is bounded)."""
    out = Sentences()
    for part in iter_sentences(path, column, id_column):
        out.extend(part)
    return out


def distinct(texts: list[str]) -> tuple[list[str], list[int]]:
    """Distinct texts in first-seen order, and for each input text the index of its distinct text."""
    index: dict[str, int] = {}
    inverse = [index.setdefault(text, len(index)) for text in texts]
    return list(index), inverse
