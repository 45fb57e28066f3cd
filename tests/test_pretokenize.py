"""The token cache: built once, reused, and rebuilt for a new tokenizer or a new data version."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_training_toydata import write_toy_home
from typer.testing import CliRunner

from simpair.models.tiny import default_backbone
from simpair.models.tokenizer import load_tokenizer, tokenizer_fingerprint
from simpair.tokens import pretokenize, read_tokens


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201
    return load_tokenizer(default_backbone())


def test_cross_form_holds_both_orders_and_matches_the_tokenizer(home: Path, tokenizer) -> None:  # noqa: ANN001
    write_toy_home(home)
    ts = pretokenize(home, "msrp", "train", tokenizer, 32, "cross")
    assert not ts.reused and ts.rows == 48
    assert ts.path == home / "tokens" / ts.key / "msrp-train.parquet"
    frame = read_tokens(ts)
    from simpair.catalog import Catalog

    raw = Catalog(home).read_split("msrp", "train")
    enc = tokenizer(raw["text_a"][3], raw["text_b"][3], truncation=True, max_length=32)
    assert frame["input_ids"][3].to_list() == enc["input_ids"]
    assert frame["token_type_ids"][3].to_list() == enc["token_type_ids"]
    rev = tokenizer(raw["text_b"][3], raw["text_a"][3], truncation=True, max_length=32)
    assert frame["input_ids_ba"][3].to_list() == rev["input_ids"]
    assert frame["length"].max() <= 32
    assert frame["pair_id"].to_list() == raw["pair_id"].to_list()
    assert frame["label"].to_list() == raw["label"].to_list()


def test_cache_is_reused_and_keyed_by_tokenizer_length_form_and_version(
    home: Path,
    tokenizer,  # noqa: ANN001
) -> None:
    write_toy_home(home)
    first = pretokenize(home, "stsb", "train", tokenizer, 64, "bi")
    mtime = first.path.stat().st_mtime_ns
    again = pretokenize(home, "stsb", "train", tokenizer, 64, "bi")
    assert again.reused and again.path == first.path and first.path.stat().st_mtime_ns == mtime
    assert tokenizer_fingerprint(tokenizer) in first.key and "stsb-s1" in first.key

    assert pretokenize(home, "stsb", "train", tokenizer, 32, "bi").key != first.key
    assert pretokenize(home, "stsb", "train", tokenizer, 64, "cross").key != first.key

    other = load_tokenizer(default_backbone())
    other.add_tokens(["simpairword"])
    changed = pretokenize(home, "stsb", "train", other, 64, "bi")
    assert not changed.reused and changed.key != first.key

    write_toy_home(home, msrp_version="v2")  # a new msrp version: a new key, old cache untouched
    v1 = pretokenize(home, "msrp", "test", tokenizer, 64, "bi", version="v1")
    v2 = pretokenize(home, "msrp", "test", tokenizer, 64, "bi")
    assert v2.version == "v2" and v2.key != v1.key and v1.path.exists()


def test_cli_pretokenize_builds_then_reuses(home: Path, tmp_path: Path) -> None:
    from simpair.cli import app

    write_toy_home(home)
    config = tmp_path / "c.yaml"
    config.write_text(
        "name: c\ntask: paraphrase\nkind: cross\nobjective: bce\nbackbone: tiny\n"
        "train: [{dataset: msrp, split: train}]\n"
        "evaluate_on: [{dataset: msrp, split: test}]\nmax_length: 48\n"
    )
    runner = CliRunner()
    first = runner.invoke(app, ["pretokenize", "--config", str(config), "--home", str(home)])
    assert first.exit_code == 0, first.output
    assert "built" in first.output and "msrp/test" in first.output
    second = runner.invoke(app, ["pretokenize", "--config", str(config), "--home", str(home)])
    assert second.exit_code == 0 and "reused" in second.output and "built" not in second.output


def test_fingerprint_ignores_call_options_but_not_vocabulary(tokenizer) -> None:  # noqa: ANN001
    before = tokenizer_fingerprint(tokenizer)
    tokenizer(["a b c"], truncation=True, max_length=7, padding="max_length")
    assert tokenizer_fingerprint(tokenizer) == before
