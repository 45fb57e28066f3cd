"""Streaming pre-tokenization: row groups of compact ids equal to the tokenizer's own call, row by row."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_training_toydata import make_pairs, write_dataset

from simpair.models.tiny import default_backbone
from simpair.models.tokenizer import load_tokenizer
from simpair.pair_tokens.encode import FastEncoder, PlainEncoder, encoder_for, token_schema
from simpair.tokens import iter_pair_batches, pretokenize

MAX_LENGTH = 16


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201
    return load_tokenizer(default_backbone())


def _toy(home: Path) -> list[tuple[str, str, float]]:
    """Short and long pairs (some truncate, some do not) and a text that repeats across rows."""
    rows = make_pairs(40, 7, graded=False)
    rows += [("short one.", "a much longer sentence " * 4, 1.0), ("the cat sat.", "the cat sat.", 1.0)]
    write_dataset(home, "toy", "v1", {"train": ("train", rows)}, graded=False)
    return rows


@pytest.mark.parametrize("form", ["cross", "bi"])
def test_streamed_tokens_equal_the_tokenizer_row_by_row(home: Path, tokenizer, form: str) -> None:  # noqa: ANN001
    rows = _toy(home)
    ts = pretokenize(home, "toy", "train", tokenizer, MAX_LENGTH, form, batch_rows=9)  # type: ignore[arg-type]
    meta = pq.ParquetFile(ts.path)
    assert meta.metadata.num_row_groups == 5 and ts.rows == len(rows)
    table = pq.read_table(ts.path)
    assert table.schema == token_schema(form, pa.uint16())  # type: ignore[arg-type]
    got = table.to_pylist()
    flags = []
    for (a, b, _), row in zip(rows, got, strict=True):
        if form == "cross":
            for suffix, (x, y) in (("", (a, b)), ("_ba", (b, a))):
                enc = tokenizer(x, y, truncation=True, max_length=MAX_LENGTH)
                assert row[f"input_ids{suffix}"] == enc["input_ids"]
                assert row[f"token_type_ids{suffix}"] == enc["token_type_ids"]
                assert row[f"length{suffix}"] == len(enc["input_ids"])
            full = len(tokenizer(a, b)["input_ids"])
        else:
            for side, text in (("a", a), ("b", b)):
                enc = tokenizer(text, truncation=True, max_length=MAX_LENGTH)
                assert row[f"ids_{side}"] == enc["input_ids"] and row[f"length_{side}"] == len(
                    enc["input_ids"]
                )
            full = max(len(tokenizer(a)["input_ids"]), len(tokenizer(b)["input_ids"]))
        assert row["truncated"] == (full > MAX_LENGTH)
        flags.append(row["truncated"])
    assert any(flags) and not all(flags)  # the toy split exercises both branches
    manifest = json.loads((ts.path.parent / "manifest.json").read_text())
    assert manifest["format"] == 2 and manifest["ids_dtype"] == "uint16"
    assert manifest["splits"]["train"]["rows"] == len(rows)
    assert manifest["splits"]["train"]["truncated"] == sum(flags)
    assert "-f2-" in ts.key  # a cache of another format lives under another key


@pytest.mark.parametrize("form", ["cross", "bi"])
def test_template_row_by_row_and_plain_encoders_agree(home: Path, tokenizer, form: str) -> None:  # noqa: ANN001
    _toy(home)
    source = home / "datasets" / "toy" / "v1" / "train.parquet"
    fast = encoder_for(tokenizer, MAX_LENGTH, form)  # type: ignore[arg-type]
    assert isinstance(fast, FastEncoder) and fast.template is not None
    row_by_row = FastEncoder(tokenizer, MAX_LENGTH, form, fast.schema, threads=1, use_template=False)  # type: ignore[arg-type]
    plain = PlainEncoder(tokenizer, MAX_LENGTH, form, fast.schema)  # type: ignore[arg-type]
    for batch in iter_pair_batches(source, batch_rows=16):
        want = plain.encode(batch)
        assert fast.encode(batch).equals(want) and row_by_row.encode(batch).equals(want)
