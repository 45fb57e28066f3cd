"""`infer_contract`: one raw file in, a reviewed-to-be contract draft out.

It reads the head of the file, settles its kind (the name can lie: a Parquet or JSON Lines file named
.txt is recognised by its content), turns the sample into columns and hands them to `assemble`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpair.ingest.infer.assemble import assemble
from simpair.ingest.infer.columns import table_of_objects
from simpair.ingest.infer.dialect import Parse
from simpair.ingest.infer.errors import InferError
from simpair.ingest.infer.sample import decode, kind_by_name, read_head
from simpair.ingest.infer.tables import delimited_format, delimited_table, jsonl_rows, parquet_rows
from simpair.ingest.infer.yaml_writer import contract_yaml
from simpair.ingest.sources import compression_of

# A csv record may span lines; this many physical lines per sampled record is plenty.
_LINES_PER_RECORD = 20


@dataclass
class InferredContract:
    """A proposed contract (plain YAML-ready data) and what a person should check before using it."""

    contract: dict[str, Any]
    notes: list[str]
    source: str
    sampled: int
    inline: dict[str, str] = field(default_factory=dict)  # dotted key -> short comment on that line

    def to_yaml(self) -> str:
        """The contract as YAML: a header of review notes, then the fields, some with a comment."""
        header = [
            f"Proposed data contract for {self.source}, inferred by `simpair contract infer` "
            f"from its first {self.sampled} records.",
            "Read every `review:` line and fix what is wrong, then save it as "
            f"data_contracts/{self.contract['dataset']}.yaml and run `simpair contract check` on it.",
        ]
        return contract_yaml(self.contract, header, self.notes, self.inline)


def infer_contract(
    location: str | Path, dataset: str | None = None, sample_rows: int = 5000
) -> InferredContract:
    """Draft a contract for one raw file (local path or fsspec URL) from its first `sample_rows` records.

    Raises InferError when the file cannot be read as data at all, because a draft of a wrong file (a
    binary, an empty export) would only mislead.
    """
    if sample_rows < 2:
        raise ValueError(f"sample_rows must be at least 2, got {sample_rows}")
    shown = str(location)
    name, data = read_head(location)
    notes: list[str] = []
    inline: dict[str, str] = {}
    kind = kind_by_name(name)
    if kind == "delimited" and data.startswith(b"PAR1"):
        kind = "parquet"
        notes.append(f"{name} is a Parquet file by its content, though its name does not say so")
    fmt: dict[str, Any] = {}
    if kind != "delimited":
        fmt["kind"] = kind
    codec = compression_of(name)
    if codec is not None:
        fmt["compression"] = "infer"
        inline["format.compression"] = f"{codec}, by the file name"
        notes.append(f"compression is left as infer: {name} is read as {codec} because of its suffix")

    layout: Parse | None = None
    if kind == "parquet":
        rows = parquet_rows(data, sample_rows, shown)
        columns = table_of_objects(rows, list(range(1, len(rows) + 1)))  # ingest's line: the row number
        sampled = len(columns[0].values) if columns else 0
    else:
        text, encoding, bom = decode(data, shown, notes)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        lines = [line.removesuffix("\r") for line in lines[: (sample_rows + 1) * _LINES_PER_RECORD]]
        first = next((line for line in lines if line.strip()), "")
        if kind == "delimited" and first.lstrip().startswith("{"):
            try:
                is_object = isinstance(json.loads(first), dict)
            except json.JSONDecodeError:
                is_object = False
            if is_object:
                kind = "jsonl"
                fmt = {"kind": "jsonl", **fmt}
                notes.append(f"{name} holds one JSON object per line though its name does not say so")
        if kind == "jsonl":
            if encoding != "utf-8":
                raise InferError(f"{shown}: JSON Lines must be UTF-8 text, and this file is not")
            rows, numbers = jsonl_rows(lines, sample_rows, shown)
            columns = table_of_objects(rows, numbers)
            sampled = len(rows)
        else:
            layout, columns, sampled = delimited_table(lines, sample_rows, shown, notes, inline)
            fmt.update(delimited_format(layout, encoding, bom, inline))

    delimiter = layout.delimiter if layout else None
    contract = assemble(columns, fmt, delimiter, name, dataset, shown, notes, inline)
    return InferredContract(contract=contract, notes=notes, source=shown, sampled=sampled, inline=inline)
