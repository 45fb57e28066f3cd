"""Data contracts: the YAML files in `data_contracts/` that say how a raw source maps onto pairs.

Everything source-specific (delimiter, quoting, header, which file is which split, which column is
which, label kind and range, checks) lives in a contract, so a new CSV/TSV dataset is ingested by
adding a YAML file, never by changing code. The pydantic model rejects a contract that is
inconsistent before any data is read, with the contract file and field named in the error.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ColumnRef = str | int
"""A source column by header name (str) or by 0-based position (int)."""

SplitRole = Literal["train", "dev", "test"]


class ContractError(ValueError):
    """A contract file that cannot be read or does not describe a consistent source."""


class _Strict(BaseModel):
    # Unknown keys are almost always typos ("delimeter"); silently ignoring them would ingest with defaults.
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileFormat(_Strict):
    """How the bytes of every file of the source are laid out."""

    delimiter: str = Field(description="field separator, e.g. '\\t' or ','")
    quoting: Literal["none", "csv"] = Field(
        description="'none': quotes are text (one physical line = one record); "
        "'csv': RFC-4180 style quoting, a quoted field may span several lines"
    )
    quotechar: str = '"'
    header: bool = Field(description="the first record is a header row, not data")
    encoding: str = "utf-8"
    bom: Literal["allow", "forbid"] = Field(
        default="allow", description="a UTF-8 byte-order mark is stripped and counted, or fails the file"
    )
    field_counts: list[int] = Field(
        description="allowed number of fields per record; records with another count are quarantined"
    )
    min_valid_fraction: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="below this share of records with an allowed field count the whole file is "
        "rejected (wrong delimiter, wrong file) instead of quarantining nearly every line",
    )

    @field_validator("delimiter", "quotechar")
    @classmethod
    def _one_char(cls, value: str) -> str:
        if len(value) != 1:
            raise ValueError(f"must be exactly one character, got {value!r}")
        return value

    @field_validator("field_counts")
    @classmethod
    def _positive_counts(cls, value: list[int]) -> list[int]:
        if not value or any(n < 1 for n in value):
            raise ValueError("must list at least one positive field count")
        return sorted(set(value))

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        import codecs

        try:
            codecs.lookup(value)
        except LookupError as exc:
            raise ValueError(f"unknown encoding {value!r}") from exc
        return value


class SplitFiles(_Strict):
    """One split: the files (glob relative to the sources folder) and its role for leakage checks."""

    split: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    role: SplitRole
    pattern: str = Field(description="glob relative to --sources; all matches are read in name order")


class ColumnMapping(_Strict):
    """Where each canonical field comes from in a raw record."""

    text_a: ColumnRef
    text_b: ColumnRef
    label: ColumnRef = Field(description="the column holding the binary label or the graded score")
    pair_id: ColumnRef | list[ColumnRef] | None = Field(
        default=None,
        description="one column, or several joined with pair_id_separator; "
        "absent: '<split>-<source line>' is used",
    )
    pair_id_separator: str = "-"

    def pair_id_columns(self) -> list[ColumnRef]:
        if self.pair_id is None:
            return []
        return list(self.pair_id) if isinstance(self.pair_id, list) else [self.pair_id]

    def all_refs(self) -> list[ColumnRef]:
        return [self.text_a, self.text_b, self.label, *self.pair_id_columns()]


class LabelSpec(_Strict):
    """Binary labels stay as int8; graded scores are rescaled from `range` to 0-1 (original kept)."""

    kind: Literal["binary", "graded"]
    values: list[int] = Field(default=[0, 1], description="binary only: the allowed label values")
    range: tuple[float, float] | None = Field(
        default=None, description="graded only: [min, max] of raw score"
    )

    @model_validator(mode="after")
    def _kind_fields(self) -> LabelSpec:
        if self.kind == "graded":
            if self.range is None:
                raise ValueError("a graded label needs range: [min, max]")
            low, high = self.range
            if not high > low:
                raise ValueError(f"range max must be above min, got {list(self.range)}")
        return self


class Checks(_Strict):
    """Row checks, enforced with pandera; a failing row is quarantined with the check's reason."""

    non_empty_texts: bool = True
    label_domain: bool = True
    score_range: bool = True
    unique_pair_ids: bool = True
    drop_exact_duplicates: bool = Field(
        default=True,
        description="an exact (text_a, text_b) repeat within a split is quarantined as 'duplicate'",
    )


class Contract(_Strict):
    """One raw source (a dataset with its splits) and how to read it."""

    dataset: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    contract_version: str
    description: str = ""
    license: str = ""
    format: FileFormat
    files: list[SplitFiles] = Field(min_length=1)
    columns: ColumnMapping
    label: LabelSpec
    checks: Checks = Checks()

    # Not part of the YAML: filled by the loader so versions and errors can name the file.
    source_path: str = Field(default="", exclude=True)
    content_sha256: str = Field(default="", exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> Contract:
        names = [f.split for f in self.files]
        if len(names) != len(set(names)):
            raise ValueError(f"split names must be unique, got {names}")
        refs = self.columns.all_refs()
        if not self.format.header and any(isinstance(r, str) for r in refs):
            raise ValueError("columns are named but format.header is false: use 0-based positions")
        widest = min(self.format.field_counts)
        too_far = [r for r in refs if isinstance(r, int) and r >= widest]
        if too_far:
            raise ValueError(
                f"column positions {too_far} do not exist in records of {widest} fields (format.field_counts)"
            )
        return self

    def splits(self) -> dict[str, str]:
        """Split name -> role, in contract order."""
        return {f.split: f.role for f in self.files}


def load_contract(path: Path) -> Contract:
    """Read and validate one contract file; errors name the file and the offending field."""
    try:
        text = path.read_bytes()
        raw = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as exc:
        raise ContractError(f"{path}: cannot read contract: {exc}") from exc
    if not isinstance(raw, dict):
        raise ContractError(f"{path}: a contract must be a YAML mapping, got {type(raw).__name__}")
    try:
        contract = Contract.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ContractError(f"{path}: invalid contract: {problems}") from exc
    return contract.model_copy(
        update={"source_path": str(path), "content_sha256": hashlib.sha256(text).hexdigest()}
    )


_CONTRACT_GLOBS = ("*.yaml", "*.yml")
# The scoring-input contract lives in the same folder but describes unlabelled batches, not a dataset.
_NOT_DATASETS = re.compile(r"^(scoring|score)[-_.]")


def contract_files(contracts_dir: Path) -> list[Path]:
    """Dataset contract files in a folder, in name order (scoring-input contracts are skipped)."""
    if not contracts_dir.is_dir():
        raise ContractError(f"{contracts_dir}: contracts folder does not exist")
    found = sorted({p for g in _CONTRACT_GLOBS for p in contracts_dir.glob(g)})
    return [p for p in found if not _NOT_DATASETS.match(p.name)]
