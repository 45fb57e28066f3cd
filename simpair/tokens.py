"""Pre-tokenized cache: each dataset split tokenized once per (tokenizer, max length, input form).

Layout: `<home>/tokens/<key>/<dataset>-<split>.parquet` with a `manifest.json` beside it, where
`key = <form>-L<max_length>-<tokenizer fingerprint>-<dataset>-<dataset version>`. Every run with the
same tokenizer and data version reads the same files; a new data version or tokenizer makes a new key,
so a stale cache is never read. Files are written atomically under a file lock, so concurrent runs (or
DDP ranks) tokenize once.

Forms:
- `cross`: the joint input `[CLS] a [SEP] b [SEP]` (`input_ids`, `token_type_ids`, `length`), and the
  swapped order (`input_ids_ba`, `token_type_ids_ba`, `length_ba`) for symmetric training/prediction;
- `bi`: each text alone (`ids_a`, `ids_b`, `length_a`, `length_b`).
Both carry `pair_id`, `label`, `score` and a `truncated` flag.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock
from transformers import PreTrainedTokenizerBase

from simpair.atomic import atomic_path
from simpair.catalog import Catalog
from simpair.models.tokenizer import tokenizer_fingerprint

Form = Literal["cross", "bi"]
TOKENS_FORMAT = 1


@dataclass(frozen=True)
class TokenSplit:
    """Where one split's tokens live and whether this call reused them."""

    path: Path
    key: str
    dataset: str
    split: str
    version: str
    rows: int
    reused: bool


def cache_key(fingerprint: str, max_length: int, form: Form, dataset: str, version: str) -> str:
    return f"{form}-L{max_length}-{fingerprint}-{dataset}-{version}"


def _lengths(ids: list[list[int]]) -> pa.Array:
    return pa.array([len(x) for x in ids], type=pa.int32())


def tokenize_frame(
    frame: pl.DataFrame, tokenizer: PreTrainedTokenizerBase, max_length: int, form: Form
) -> pa.Table:
    """Tokenize canonical pairs into the cache table for one form (pure: no I/O)."""
    a = frame["text_a"].to_list()
    b = frame["text_b"].to_list()
    n = len(a)
    cols: dict[str, pa.Array] = {
        "pair_id": pa.array(frame["pair_id"].to_list(), type=pa.string()),
        "label": pa.array(frame["label"].to_list() if "label" in frame.columns else [None] * n, pa.int8()),
        "score": pa.array(frame["score"].to_list() if "score" in frame.columns else [None] * n, pa.float32()),
    }
    ids_type = pa.list_(pa.int32())
    if n == 0:
        full = {"input_ids": [], "token_type_ids": []}
    if form == "cross":
        for suffix, (x, y) in {"": (a, b), "_ba": (b, a)}.items():
            enc = tokenizer(x, y, truncation=True, max_length=max_length) if n else full
            cols[f"input_ids{suffix}"] = pa.array(enc["input_ids"], type=ids_type)
            types = enc.get("token_type_ids")
            cols[f"token_type_ids{suffix}"] = pa.array(
                types if types is not None else [[0] * len(i) for i in enc["input_ids"]],
                type=pa.list_(pa.int8()),
            )
            cols[f"length{suffix}"] = _lengths(enc["input_ids"])
        raw_a = tokenizer(a, add_special_tokens=False)["input_ids"] if n else []
        raw_b = tokenizer(b, add_special_tokens=False)["input_ids"] if n else []
        special = tokenizer.num_special_tokens_to_add(pair=True)
        cols["truncated"] = pa.array(
            [len(x) + len(y) + special > max_length for x, y in zip(raw_a, raw_b, strict=True)],
            type=pa.bool_(),
        )
    elif form == "bi":
        enc_a = tokenizer(a, truncation=True, max_length=max_length) if n else full
        enc_b = tokenizer(b, truncation=True, max_length=max_length) if n else full
        cols["ids_a"] = pa.array(enc_a["input_ids"], type=ids_type)
        cols["ids_b"] = pa.array(enc_b["input_ids"], type=ids_type)
        cols["length_a"] = _lengths(enc_a["input_ids"])
        cols["length_b"] = _lengths(enc_b["input_ids"])
        raw_a = tokenizer(a, add_special_tokens=False)["input_ids"] if n else []
        raw_b = tokenizer(b, add_special_tokens=False)["input_ids"] if n else []
        special = tokenizer.num_special_tokens_to_add(pair=False)
        cols["truncated"] = pa.array(
            [max(len(x), len(y)) + special > max_length for x, y in zip(raw_a, raw_b, strict=True)],
            type=pa.bool_(),
        )
    else:
        raise ValueError(f"form must be 'cross' or 'bi', got {form!r}")
    return pa.table(cols)


def pretokenize(
    home: Path,
    dataset: str,
    split: str,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    form: Form,
    version: str | None = None,
) -> TokenSplit:
    """Tokens of one split, from the cache if present, else tokenized now and cached."""
    catalog = Catalog(home)
    version = version or catalog.current_version(dataset)
    fingerprint = tokenizer_fingerprint(tokenizer)
    key = cache_key(fingerprint, max_length, form, dataset, version)
    folder = Path(home) / "tokens" / key
    path = folder / f"{dataset}-{split}.parquet"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        if path.exists():
            rows = pq.ParquetFile(path).metadata.num_rows
            return TokenSplit(path, key, dataset, split, version, rows, reused=True)
        frame = catalog.read_split(dataset, split, version)
        table = tokenize_frame(frame, tokenizer, max_length, form)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp, compression="zstd")
        manifest_path = folder / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        manifest.update(
            {
                "format": TOKENS_FORMAT,
                "form": form,
                "max_length": max_length,
                "tokenizer_fingerprint": fingerprint,
                "tokenizer_class": type(tokenizer).__name__,
                "dataset": dataset,
                "dataset_version": version,
            }
        )
        manifest.setdefault("splits", {})[split] = {
            "rows": table.num_rows,
            "truncated": int(sum(table["truncated"].to_pylist())),
            "source": str(catalog.split_path(dataset, split, version)),
        }
        manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return TokenSplit(path, key, dataset, split, version, table.num_rows, reused=False)


def read_tokens(token_split: TokenSplit | Path) -> pl.DataFrame:
    """The cached token table as a polars frame."""
    path = token_split.path if isinstance(token_split, TokenSplit) else Path(token_split)
    return pl.read_parquet(path)
