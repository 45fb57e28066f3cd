"""Shared by the ingest and contract tests: a minimal valid contract for a 3-column TSV dataset."""

TOY_CONTRACT = """\
dataset: toy
contract_version: "1"
format:
  delimiter: "\\t"
  quoting: none
  header: true
  field_counts: [3]
files:
  - {split: train, role: train, pattern: "toy/train.tsv"}
  - {split: test, role: test, pattern: "toy/test.tsv"}
columns: {label: label, text_a: a, text_b: b}
label: {kind: binary, values: [0, 1]}
"""
