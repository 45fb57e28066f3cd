"""Data contracts: the YAML files in `data_contracts/` that say how a raw source maps onto pairs.

Everything source-specific (file kind and compression, delimiter, quoting, header, which file or which
column value is which split, which column is which, label kind and range, checks) lives in a contract,
so a new dataset (TSV/CSV, Parquet or JSON Lines, local or at an fsspec URL) is ingested by adding a
YAML file, never by changing code. The pydantic model rejects a contract that is
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

# The canonical columns of an ingested split (simpair.schema.PAIR_SCHEMA); extra columns may not reuse them.
_CANONICAL_COLUMNS = frozenset(
    {"pair_id", "text_a", "text_b", "label", "score", "score_raw", "split", "dataset", "dataset_version",
     "source_file", "source_sha256", "source_line"}
)  # fmt: skip


class ContractError(ValueError):
    """A contract file that cannot be read or does not describe a consistent source."""


class _Strict(BaseModel):
    # Unknown keys are almost always typos ("delimeter"); silently ignoring them would ingest with defaults.
    model_config = ConfigDict(extra="forbid", frozen=True)


SourceKind = Literal["delimited", "parquet", "jsonl"]


class FileFormat(_Strict):
    """How the bytes of every file of the source are laid out."""

    kind: SourceKind = Field(
        default="delimited",
        description="'delimited': TSV/CSV text; 'parquet': a Parquet table; "
        "'jsonl': one JSON object per line",
    )
    compression: Literal["infer", "none", "gzip", "zstd"] = Field(
        default="infer",
        description="'infer': by file name (.gz -> gzip, .zst/.zstd -> zstd, else none); "
        "delimited and jsonl only",
    )
    delimiter: str | None = Field(default=None, description="delimited: field separator, e.g. '\\t' or ','")
    quoting: Literal["none", "csv"] | None = Field(
        default=None,
        description="delimited: 'none': quotes are text (one physical line = one record); "
        "'csv': RFC-4180 style quoting, a quoted field may span several lines",
    )
    quotechar: str = '"'
    header: bool | None = Field(
        default=None,
        description="delimited: the first record is a header row, not data "
        "(parquet and jsonl columns are always named)",
    )
    encoding: str = "utf-8"
    bom: Literal["allow", "forbid"] = Field(
        default="allow", description="a UTF-8 byte-order mark is stripped and counted, or fails the file"
    )
    field_counts: list[int] | None = Field(
        default=None,
        description="delimited: allowed number of fields per record; "
        "records with another count are quarantined",
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
    def _one_char(cls, value: str | None) -> str | None:
        if value is not None and len(value) != 1:
            raise ValueError(f"must be exactly one character, got {value!r}")
        return value

    @field_validator("field_counts")
    @classmethod
    def _positive_counts(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
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

    @model_validator(mode="after")
    def _fields_of_kind(self) -> FileFormat:
        text_layout = {"delimiter": self.delimiter, "quoting": self.quoting, "header": self.header}
        text_layout["field_counts"] = self.field_counts
        if self.kind == "delimited":
            missing = [name for name, value in text_layout.items() if value is None]
            if missing:
                raise ValueError(f"kind: delimited needs {', '.join(missing)}")
        else:
            given = [name for name, value in text_layout.items() if value is not None]
            if given:
                raise ValueError(f"{', '.join(given)} only apply to kind: delimited, not kind: {self.kind}")
            if self.kind == "parquet" and self.compression not in ("infer", "none"):
                raise ValueError("parquet files carry their own compression; leave compression unset")
        return self

    @property
    def named_columns(self) -> bool:
        """Columns can be referred to by name: a delimited file with a header, or any parquet/jsonl file."""
        return self.kind != "delimited" or bool(self.header)


_ROLE_BY_NAME: dict[str, SplitRole] = {"train": "train", "dev": "dev", "test": "test"}


class SplitFiles(_Strict):
    """One split: its files (glob relative to the sources) and its role for leakage checks."""

    split: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    role: SplitRole | None = Field(
        default=None, description="train | dev | test; may be left out for splits named train, dev or test"
    )
    pattern: str | None = Field(
        default=None,
        description="glob relative to --sources; all matches are read in name order. "
        "Left out when split_column assigns rows to splits",
    )

    @model_validator(mode="after")
    def _role_from_name(self) -> SplitFiles:
        if self.role is None:
            if self.split not in _ROLE_BY_NAME:
                raise ValueError(f"split {self.split!r} needs a role: train, dev or test")
            object.__setattr__(self, "role", _ROLE_BY_NAME[self.split])
        return self


class TextPair(_Strict):
    """Both texts in one field, e.g. a quoted CSV cell holding two sentences on two lines."""

    column: ColumnRef
    separator: str = Field(default="\n", min_length=1)


class SplitColumn(_Strict):
    """One file (or pattern) holding every split, with a column saying which split a row is in."""

    column: ColumnRef
    pattern: str = Field(description="glob relative to --sources; every match holds rows of every split")
    values: dict[str, str] = Field(
        min_length=1, description="value of the column (whitespace trimmed) -> split name from `files`"
    )

    @field_validator("values", mode="before")
    @classmethod
    def _keys_as_text(cls, value: object) -> object:
        # YAML reads `1: train` with an int key; the column's values are compared as text
        if isinstance(value, dict):
            return {str(k).strip(): v for k, v in value.items()}
        return value


ExtraType = Literal["auto", "string", "int", "float", "bool"]
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class ExtraColumn(_Strict):
    """A column kept beside the pair as a typed Parquet column (e.g. a second label for multi-task)."""

    name: str = Field(pattern=_NAME, description="the output column's name")
    column: ColumnRef | None = Field(default=None, description="source column; default: `name`")
    type: ExtraType = Field(
        default="auto",
        description="'auto': int if every value is an integer, else float if every value is a number, "
        "else bool if every value is true/false, else string",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: object) -> object:
        if isinstance(value, str):  # `extra: [entailment_label]` keeps the column under its own name
            return {"name": value, "column": value}
        if isinstance(value, int):
            raise ValueError(f"a column by position needs a name: {{name: ..., column: {value}}}")
        return value

    @property
    def source(self) -> ColumnRef:
        return self.name if self.column is None else self.column


class ColumnMapping(_Strict):
    """Where each canonical field comes from in a raw record."""

    text_a: ColumnRef | None = None
    text_b: ColumnRef | None = None
    text_pair: TextPair | None = Field(
        default=None, description="both texts in one field, split on `separator`; instead of text_a/text_b"
    )
    label: ColumnRef = Field(description="the column holding the binary label or the graded score")
    pair_id: ColumnRef | list[ColumnRef] | None = Field(
        default=None,
        description="one column, or several joined with pair_id_separator; "
        "absent: '<split>-<file stem>-<source line>' is used",
    )
    pair_id_separator: str = "-"
    extra: list[ExtraColumn] = Field(default_factory=list, description="other columns kept, typed")

    @model_validator(mode="after")
    def _texts(self) -> ColumnMapping:
        pair_given = self.text_pair is not None
        if pair_given and (self.text_a is not None or self.text_b is not None):
            raise ValueError("give either text_pair or text_a and text_b, not both")
        if not pair_given and (self.text_a is None or self.text_b is None):
            raise ValueError("text_a and text_b are required (or text_pair for both texts in one field)")
        if not pair_given and self.text_a == self.text_b:
            raise ValueError(
                f"text_a and text_b both map to column {self.text_a!r}: each text needs its own column; "
                "for two texts in one field use columns.text_pair: {column: ..., separator: ...}"
            )
        names = [e.name for e in self.extra]
        clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & _CANONICAL_COLUMNS))
        if clash:
            raise ValueError(f"extra column names must be unique and not canonical columns: {clash}")
        return self

    def pair_id_columns(self) -> list[ColumnRef]:
        if self.pair_id is None:
            return []
        return list(self.pair_id) if isinstance(self.pair_id, list) else [self.pair_id]

    def text_refs(self) -> list[ColumnRef]:
        if self.text_pair is not None:
            return [self.text_pair.column]
        assert self.text_a is not None and self.text_b is not None
        return [self.text_a, self.text_b]

    def all_refs(self) -> list[ColumnRef]:
        return [*self.text_refs(), self.label, *self.pair_id_columns(), *(e.source for e in self.extra)]


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
    """Row checks and split guards.

    The checks run as polars expressions (`simpair.ingest.checks`); a failing row is quarantined with the
    check's reason and a detail naming the field, its value and the rule (`score 7.2 outside [0, 5]`).
    """

    non_empty_texts: bool = True
    label_domain: bool = True
    score_range: bool = True
    unique_pair_ids: bool = True
    drop_exact_duplicates: bool = Field(
        default=True,
        description="a repeat of the same pair within a split is quarantined as 'duplicate'",
    )
    symmetric_pairs: bool = Field(
        default=True,
        description="(a, b) and (b, a) are the same pair for duplicates (paraphrase and similarity are "
        "symmetric); false for directed tasks such as entailment",
    )
    # Split guards: a new version that fails one fails the source and CURRENT keeps the last good version.
    min_clean_rows: int = Field(default=1, ge=0, description="a split with fewer clean rows fails the source")
    min_clean_share: float = Field(
        default=0.0, ge=0.0, le=1.0, description="clean rows / records read; below it the source fails"
    )
    min_share_of_current: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="clean rows / clean rows of the same split in the current version; below it the source "
        "fails (a shrinking dataset is usually a broken export). 0 turns the guard off",
    )


ConflictRule = Literal["keep_first", "mean", "quarantine"]


class Duplicates(_Strict):
    """What happens to copies of one pair (exact, or swapped with checks.symmetric_pairs) whose labels differ.

    Copies with equal labels are plain duplicates: the first is kept, the others are quarantined as
    `duplicate`. Copies that disagree (SICK-style exports carry 3.7 beside 4.4 for the same pair)
    say that the label is uncertain, so by default no copy is trusted.
    """

    conflicting_labels: ConflictRule = Field(
        default="quarantine",
        description="'quarantine': every copy is quarantined as 'conflicting_duplicate'; 'keep_first': the "
        "first copy is kept as it is; 'mean': the first copy is kept with the mean of the copies' "
        "scores (graded labels only). Either way the conflicts are counted in the ingest report",
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
    duplicates: Duplicates = Duplicates()
    split_column: SplitColumn | None = Field(
        default=None, description="rows of one file (or pattern) assigned to splits by a column's value"
    )

    # Not part of the YAML: filled by the loader so versions and errors can name the file.
    source_path: str = Field(default="", exclude=True)
    content_sha256: str = Field(default="", exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> Contract:
        if self.duplicates.conflicting_labels == "mean" and self.label.kind != "graded":
            raise ValueError(
                "duplicates.conflicting_labels: mean needs a graded label; for binary labels use "
                "quarantine or keep_first"
            )
        names = [f.split for f in self.files]
        if len(names) != len(set(names)):
            raise ValueError(f"split names must be unique, got {names}")
        if self.split_column is None:
            unfiled = [f.split for f in self.files if f.pattern is None]
            if unfiled:
                raise ValueError(f"splits {unfiled} need a pattern (or assign rows with split_column)")
        else:
            filed = [f.split for f in self.files if f.pattern is not None]
            if filed:
                raise ValueError(
                    f"with split_column, files list splits and roles only; splits {filed} give a pattern "
                    "(put the one pattern under split_column.pattern)"
                )
            targets = set(self.split_column.values.values())
            unknown = sorted(targets - set(names))
            if unknown:
                raise ValueError(f"split_column.values name splits {unknown} that files does not list")
            unused = [n for n in names if n not in targets]
            if unused:
                raise ValueError(f"splits {unused} get no rows: no split_column value maps to them")
        refs = self.columns.all_refs()
        if self.split_column is not None:
            refs.append(self.split_column.column)
        if not self.format.named_columns and any(isinstance(r, str) for r in refs):
            raise ValueError("columns are named but format.header is false: use 0-based positions")
        if self.format.field_counts is not None:
            widest = min(self.format.field_counts)
            too_far = [r for r in refs if isinstance(r, int) and r >= widest]
            if too_far:
                raise ValueError(
                    f"column positions {too_far} do not exist in records of {widest} fields "
                    "(format.field_counts)"
                )
        return self

    def split_pattern(self, split: SplitFiles) -> str:
        """The glob a split's rows come from (its own, or the split column's shared one)."""
        if split.pattern is not None:
            return split.pattern
        assert self.split_column is not None
        return self.split_column.pattern

    def splits(self) -> dict[str, str]:
        """Split name -> role, in contract order."""
        return {f.split: str(f.role) for f in self.files}


def _message(text: str) -> str:
    """A validator's sentence as written (pydantic prefixes the ones our validators raise)."""
    return str(text).removeprefix("Value error, ")


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
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {_message(err['msg'])}"
            for err in exc.errors()
        )
        raise ContractError(f"{path}: invalid contract: {problems}") from exc
    return contract.model_copy(
        update={"source_path": str(path), "content_sha256": hashlib.sha256(text).hexdigest()}
    )


_CONTRACT_GLOBS = ("*.yaml", "*.yml")
# The scoring-input contract lives in the same folder but describes unlabelled batches, not a dataset;
# the review contracts describe files `simpair review import` writes, ingested by that command only.
_NOT_DATASETS = re.compile(r"^(scoring|score|reviews)[-_.]")


def contract_files(contracts_dir: Path) -> list[Path]:
    """Dataset contract files in a folder, in name order (scoring-input contracts are skipped)."""
    if not contracts_dir.is_dir():
        raise ContractError(f"{contracts_dir}: contracts folder does not exist")
    found = sorted({p for g in _CONTRACT_GLOBS for p in contracts_dir.glob(g)})
    return [p for p in found if not _NOT_DATASETS.match(p.name)]
