"""Propose a data contract for a raw file, so adding a dataset starts from a draft instead of a blank page.

Writing a contract by hand means opening the file and guessing the delimiter, the quoting, which column
is which and what the label's range is; getting any of those wrong quarantines most rows. The guesses
made here come from a sample of the first records and are meant to be reviewed, not trusted: every
decision that cannot be read off the data with certainty becomes a `# review:` note in the YAML.
Nothing is written to disk; the caller prints the draft.

The steps, one module each: `sample` reads the file's head and sniffs its kind and encoding, `dialect`
finds the delimiter, quoting and header, `tables` and `columns` turn the sample into columns, `roles`
picks which column is which, `assemble` builds the contract, `yaml_writer` writes it, `draft` runs them.
"""

from __future__ import annotations

from simpair.ingest.infer.draft import InferredContract, infer_contract
from simpair.ingest.infer.errors import InferError

__all__ = ["InferError", "InferredContract", "infer_contract"]
