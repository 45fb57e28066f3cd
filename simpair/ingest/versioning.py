"""Dataset version ids: a pure function of what went in, so an unchanged input means no work.

version = sha256(source file hashes + contract bytes + code fingerprint). The code fingerprint
includes the output schemas and `INGEST_CODE_VERSION`, which is bumped whenever a code change
alters the rows produced from the same input (cleaning rules, reasons), so old outputs are not
reused under new rules.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from simpair.contracts import Contract
from simpair.schema import PAIR_SCHEMA, QUARANTINE_SCHEMA

# 2: default pair ids name the file (<split>-<file stem>-<line>); swapped pairs count as duplicates.
# 3: copies of a pair with different labels follow duplicates.conflicting_labels (default: all
#    quarantined as conflicting_duplicate); files differing only by compression get distinct id tags.
INGEST_CODE_VERSION = "3"


def code_fingerprint() -> str:
    text = f"{INGEST_CODE_VERSION}\n{PAIR_SCHEMA}\n{QUARANTINE_SCHEMA}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def dataset_version(contract: Contract, source_hashes: dict[str, str]) -> str:
    """16 hex chars; source paths are relative to --sources so moving the folder changes nothing."""
    payload = json.dumps(
        {
            "sources": sorted(source_hashes.items()),
            "contract": contract.content_sha256,
            "code": code_fingerprint(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
