"""The scoring-input contract: which columns a batch must have and which rows are rejected.

Kept in YAML (`data_contracts/scoring_input.yaml`) so that an operator can read, in one place,
what a batch must look like without reading the reader's code.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import yaml
from pydantic import BaseModel, ConfigDict, Field

from simpair.settings import contracts_dir

CONTRACT_FILE = "scoring_input.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ColumnRule(_Strict):
    """One named input column: whether it must exist and which Arrow types are accepted."""

    required: bool
    types: list[str]


class RowRules(_Strict):
    """Row-level checks: failing rows are rejected, the rest of the file goes on."""

    reject_null: bool = True
    reject_blank: bool = True
    reject_non_utf8: bool = True
    max_chars: int = Field(default=4000, gt=0)


class ScoringContract(_Strict):
    """Contents of `scoring_input.yaml`."""

    name: str
    version: int
    columns: dict[str, ColumnRule]
    rows: RowRules = RowRules()
    reserved_prefix: str = "input_"

    def schema_problem(self, schema: pa.Schema) -> str | None:
        """Why a file with this schema cannot be scored at all (None if it can)."""
        for name, rule in self.columns.items():
            index = schema.get_field_index(name)
            if index < 0:
                if rule.required:
                    return f"missing required column {name!r} (columns: {', '.join(schema.names)})"
                continue
            if schema.get_all_field_indices(name) != [index]:
                return f"column {name!r} appears more than once"
            type_name = _type_name(schema.field(index).type)
            if type_name not in rule.types:
                return f"column {name!r} has type {type_name}, expected one of {', '.join(rule.types)}"
        return None


def _type_name(dtype: pa.DataType) -> str:
    # Dictionary-encoded strings are still strings; the reader decodes them.
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    return str(dtype).replace("large_utf8", "large_string").replace("utf8", "string")


def load_contract(path: str | Path | None = None) -> ScoringContract:
    """Read the contract file: explicit path, else `<contracts dir>/scoring_input.yaml`."""
    file = Path(path) if path else contracts_dir() / CONTRACT_FILE
    data = yaml.safe_load(file.read_text(encoding="utf-8"))
    try:
        return ScoringContract.model_validate(data)
    except Exception as exc:  # pydantic names the field; add the file
        raise ValueError(f"{file}: invalid scoring contract: {exc}") from exc
