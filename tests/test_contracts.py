"""Data contracts: the repository's contracts load, and a broken one is refused with file and field named."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_helpers import TOY_CONTRACT

from simpair.contracts import ContractError, contract_files, load_contract
from simpair.ingest import load_contracts

REPO = Path(__file__).resolve().parents[1]


def test_repository_contracts_load() -> None:
    files = contract_files(REPO / "data_contracts")
    assert [p.name for p in files] == ["msrp.yaml", "stsb.yaml"]  # scoring_input.yaml is not a dataset
    msrp = load_contract(REPO / "data_contracts" / "msrp.yaml")
    assert msrp.splits() == {"train": "train", "test": "test"}
    assert msrp.format.quoting == "none" and msrp.label.kind == "binary"
    stsb = load_contract(REPO / "data_contracts" / "stsb.yaml")
    assert stsb.splits() == {"train": "train", "dev": "dev", "test": "test"}
    assert stsb.format.field_counts == [7, 9] and stsb.label.range == (0.0, 5.0)
    assert len(stsb.content_sha256) == 64


def test_contract_errors_name_file_and_field(tmp_path: Path) -> None:
    cases = {
        "typo": (TOY_CONTRACT.replace("quoting:", "quotng:"), "format.quotng"),
        "named_without_header": (
            TOY_CONTRACT.replace("header: true", "header: false"),
            "use 0-based positions",
        ),
        "graded_without_range": (
            TOY_CONTRACT.replace("kind: binary, values: [0, 1]", "kind: graded"),
            "needs range",
        ),
        "bad_role": (TOY_CONTRACT.replace("role: test", "role: eval"), "files.1.role"),
        "position_out_of_range": (
            TOY_CONTRACT.replace("header: true", "header: false").replace(
                "{label: label, text_a: a, text_b: b}", "{label: 0, text_a: 1, text_b: 3}"
            ),
            "do not exist",
        ),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        with pytest.raises(ContractError) as info:
            load_contract(path)
        assert str(path) in str(info.value) and expected in str(info.value), (name, str(info.value))


def test_broken_and_duplicate_contracts_fail_alone(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(TOY_CONTRACT)
    (tmp_path / "b.yaml").write_text(TOY_CONTRACT)  # same dataset name again
    (tmp_path / "c.yaml").write_text("just a string")
    good, bad = load_contracts(tmp_path)
    assert [c.dataset for c in good] == ["toy"]
    errors = {Path(r.contract).name: r.error or "" for r in bad}
    assert "already defined by" in errors["b.yaml"] and "must be a YAML mapping" in errors["c.yaml"]
