"""One batch of canonical pairs -> token-cache columns, through the fast tokenizer's Rust backend.

Each distinct text of a batch is tokenized once, without special tokens or truncation (in threads:
the backend releases the GIL). Where the backend tokenizes each ' '-separated word on its own
(WordPiece behind BERT-style normalization: `splits_on_spaces`), each distinct word is tokenized once
instead and a text's ids are gathered from its words' with numpy: texts that never repeat still share
their words, so this is what keeps unique texts fast. A text's length gives the `truncated` flag.
Special tokens and truncation are then added the way `tokenizer(a, b, truncation=True, max_length=L)`
adds them inside: by the backend's template over flat numpy arrays (`simpair.tokens.template`), or,
where the post-processor has no fixed template, by the backend's own `post_process` row by row. The
cross form assembles both orders of each pair, the bi form each text alone. Ids reach Arrow as flat
numpy arrays plus offsets, never as Python lists of lists. Tokenizers without a Rust backend (or where
this path would not give the tokenizer's own ids, checked once on probe pairs) take the plain
per-batch path.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from itertools import chain
from typing import Any, Literal, Protocol

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerBase

from simpair.tokens.template import assemble, ragged_take, read_template

Form = Literal["cross", "bi"]
PROBES = [
    ("A short sentence.", "Another, slightly longer sentence about something else entirely."),
    ("word " * 200, "two words"),
    ("x", "y " * 150),
    ("one two three " * 30, "four five " * 50),
    ("  double  spaces\tand\ttabs\n", "Ünïcödé café naïve résumé, 東京 中文字 ok"),
    ("ctrl\x00char\x1fs a\u200bb \u00a0nbsp", "[SEP] inside [CLS] text, [MASK]!"),
    ("", " "),
    ("x" * 150 + " word", "re-tokenize,punctuation...(and)brackets"),
]
# Normalizers and pre-tokenizers that act on each ' '-separated piece of a text on its own: a text's
# ids are then its pieces' ids end to end (each distinct piece tokenized once). Per-character maps,
# NFD (a space is a starter: nothing reorders across it), and splits on whitespace that drop it.
WORD_NORMALIZERS = {"BertNormalizer", "Lowercase", "NFD", "StripAccents"}
WORD_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
WORD_MODELS = {"WordPiece"}


def ids_type(tokenizer: PreTrainedTokenizerBase) -> pa.DataType:
    """uint16 ids when every id fits (vocabularies up to 65,536), else int32."""
    return pa.uint16() if len(tokenizer) <= 65_536 else pa.int32()


def token_schema(form: Form, id_type: pa.DataType) -> pa.Schema:
    """Column names and order as written since the first cache format; only the integer widths shrank."""
    ids, types, length = pa.list_(id_type), pa.list_(pa.int8()), pa.int32()
    head = [("pair_id", pa.string()), ("label", pa.int8()), ("score", pa.float32())]
    if form == "cross":
        body = [("input_ids", ids), ("token_type_ids", types), ("length", length)]
        body += [("input_ids_ba", ids), ("token_type_ids_ba", types), ("length_ba", length)]
    elif form == "bi":
        body = [("ids_a", ids), ("ids_b", ids), ("length_a", length), ("length_b", length)]
    else:
        raise ValueError(f"form must be 'cross' or 'bi', got {form!r}")
    return pa.schema(head + body + [("truncated", pa.bool_())])


class BatchEncoder(Protocol):
    schema: pa.Schema

    def encode(self, batch: pa.RecordBatch | pa.Table) -> pa.Table: ...


def encoder_for(tokenizer: PreTrainedTokenizerBase, max_length: int, form: Form) -> BatchEncoder:
    """The fast encoder where it gives the tokenizer's own ids on the probes, else the plain one."""
    schema = token_schema(form, ids_type(tokenizer))
    if getattr(tokenizer, "backend_tokenizer", None) is not None:
        fast = FastEncoder(tokenizer, max_length, form, schema)
        if fast.agrees_with_tokenizer():
            return fast
    return PlainEncoder(tokenizer, max_length, form, schema)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic GC rescans every live object each time thousands of Encodings are made (5x slower)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parts(node: dict[str, Any] | None, key: str) -> list[str]:
    """Component types of a normalizer/pre-tokenizer (a `Sequence` flattened); [] for none."""
    if node is None:
        return []
    if node.get("type") == "Sequence":
        return [t for child in node.get(key, []) for t in _parts(child, key)]
    return [str(node.get("type"))]


def splits_on_spaces(backend: Tokenizer) -> bool:
    """Whether the backend tokenizes each ' '-separated piece of a text independently (WordPiece
    behind BERT-style normalization and whitespace splitting, no added token containing a space)."""
    state = json.loads(backend.to_str())
    model = (state.get("model") or {}).get("type")
    normalizers = _parts(state.get("normalizer"), "normalizers")
    pre = _parts(state.get("pre_tokenizer"), "pretokenizers")
    added = [t.get("content", "") for t in state.get("added_tokens") or []]
    return (
        model in WORD_MODELS
        and set(normalizers) <= WORD_NORMALIZERS
        and bool(pre)
        and set(pre) <= WORD_PRE_TOKENIZERS
        and not any(" " in a or a == "" for a in added)
    )


def _list_array(lists: Sequence[list[int]], dtype: type[np.generic]) -> pa.ListArray:
    """Python int lists -> Arrow list array through one flat numpy buffer (overflow raises)."""
    lengths = np.fromiter(map(len, lists), np.int32, count=len(lists))
    offsets = np.zeros(len(lists) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.fromiter(chain.from_iterable(lists), dtype, count=int(offsets[-1]))
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def _head(table: pa.Table, schema: pa.Schema) -> dict[str, Any]:
    n = table.num_rows
    out: dict[str, Any] = {}
    for name in ("pair_id", "label", "score"):
        kind = schema.field(name).type
        out[name] = table[name].cast(kind) if name in table.column_names else pa.nulls(n, kind)
    return out


def _as_table(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    return pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch


class FastEncoder:
    """Distinct texts (or, where the backend allows, distinct ' '-separated words) encoded once, in
    threads, then truncated and templated over flat arrays.

    Texts that never repeat (real logs) still share most of their words: tokenizing each distinct word
    of a batch once and gathering the texts' ids from the words' with numpy does a fraction of the Rust
    work of tokenizing every text (`splits_on_spaces` says when that gives the same ids)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
        form: Form,
        schema: pa.Schema,
        threads: int | None = None,
        use_template: bool = True,
        by_words: bool = True,
    ) -> None:
        self.tokenizer, self.max_length, self.form, self.schema = tokenizer, max_length, form, schema
        state = tokenizer.backend_tokenizer.to_str()  # private copies: the caller's tokenizer is untouched
        split_special = bool(getattr(tokenizer, "split_special_tokens", False))
        self.raw, self.post = Tokenizer.from_str(state), Tokenizer.from_str(state)
        for backend in (self.raw, self.post):
            backend.no_padding()
            backend.no_truncation()
            backend.encode_special_tokens = split_special
        side = getattr(tokenizer, "truncation_side", "right")
        self.post.enable_truncation(max_length, stride=0, strategy="longest_first", direction=side)
        self.special = tokenizer.num_special_tokens_to_add(pair=form == "cross")
        id_type = schema.field("input_ids" if form == "cross" else "ids_a").type.value_type
        self.np_ids = np.uint16 if pa.types.is_uint16(id_type) else np.int32
        self.threads = threads or max(1, min(4, len(os.sched_getaffinity(0))))
        template = read_template(self.post, self.raw, pair=form == "cross") if side == "right" else None
        usable = template is not None and template.special == self.special < max_length
        self.template = template if use_template and usable else None
        self.by_words = by_words and self.template is not None and splits_on_spaces(self.raw)

    def _encode_texts(self, texts: list[str]) -> list[Any]:
        encode = getattr(self.raw, "encode_batch_fast", self.raw.encode_batch)
        if self.threads == 1 or len(texts) < 2048:
            return encode(texts, add_special_tokens=False)
        step = -(-len(texts) // self.threads)
        chunks = [texts[i : i + step] for i in range(0, len(texts), step)]
        with ThreadPoolExecutor(self.threads) as pool:
            parts = list(pool.map(lambda c: encode(c, add_special_tokens=False), chunks))
        return [e for part in parts for e in part]

    def encode(self, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        table = _as_table(batch)
        n = table.num_rows
        cols = _head(table, self.schema)
        both = pa.concat_arrays(
            [table[c].cast(pa.large_string()).combine_chunks() for c in ("text_a", "text_b")]
        ).dictionary_encode()
        codes = both.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        ca, cb = codes[:n], codes[n:]
        with _gc_paused():
            enc: list[Any] = []
            if self.by_words:
                raw = self._word_ids(both.dictionary)
            else:
                enc = self._encode_texts(both.dictionary.to_pylist())
                raw = _list_array([e.ids for e in enc], self.np_ids)
                if self.template is not None:
                    enc = []  # the template needs only the flat ids: free the Encodings' tokens now
            lens = np.diff(raw.offsets.to_numpy())
            if self.form == "bi":
                for side, rows in (("a", ca), ("b", cb)):
                    ids, _ = self._assemble(enc, raw, (rows,))
                    cols[f"ids_{side}"] = ids
                    cols[f"length_{side}"] = pa.array(np.diff(ids.offsets.to_numpy()))
                truncated = np.maximum(lens[ca], lens[cb]) + self.special > self.max_length
            else:
                for suffix, rows in (("", (ca, cb)), ("_ba", (cb, ca))):
                    ids, types = self._assemble(enc, raw, rows)
                    cols[f"input_ids{suffix}"], cols[f"token_type_ids{suffix}"] = ids, types
                    cols[f"length{suffix}"] = pa.array(np.diff(ids.offsets.to_numpy()))
                truncated = lens[ca] + lens[cb] + self.special > self.max_length
        cols["truncated"] = pa.array(truncated)
        return pa.table({f.name: cols[f.name] for f in self.schema}).cast(self.schema)

    def _word_ids(self, texts: pa.Array) -> pa.ListArray:
        """Each text's ids (no specials, untruncated) as its ' '-separated words' ids end to end.

        Split and dictionary-encoded by Arrow, each distinct word tokenized once, then one ragged
        gather: no Python object per text or per word occurrence."""
        words = pc.split_pattern(texts.cast(pa.large_string()), " ")
        text_words = words.offsets.to_numpy().astype(np.int64)  # words of text i: [o[i], o[i+1])
        codes = pc.list_flatten(words).dictionary_encode()
        occ = codes.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        enc = self._encode_texts(codes.dictionary.to_pylist())
        vocab = _list_array([e.ids for e in enc], self.np_ids)
        del enc
        w_values, w_offsets = vocab.values.to_numpy(), vocab.offsets.to_numpy().astype(np.int64)
        occ_lens = np.diff(w_offsets)[occ]
        values = w_values[ragged_take(w_offsets[occ], occ_lens)]
        ends = np.zeros(len(occ) + 1, np.int64)
        np.cumsum(occ_lens, out=ends[1:])
        offsets = ends[text_words].astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))

    def _assemble(
        self, enc: list[Any], raw: pa.ListArray, rows: tuple[np.ndarray, ...]
    ) -> tuple[pa.ListArray, pa.ListArray]:
        """(ids, token types) of each row: by the template where there is one, else row by row."""
        values, offsets = raw.values.to_numpy(), raw.offsets.to_numpy()
        built = assemble(self.template, values, offsets, rows, self.max_length) if self.template else None
        if built is not None:
            ids, types, row_offsets = built
            offsets_arr = pa.array(row_offsets)
            return pa.ListArray.from_arrays(offsets_arr, ids), pa.ListArray.from_arrays(offsets_arr, types)
        post = self.post.post_process
        if len(rows) == 2:
            out = [
                post(enc[i], enc[j], True) for i, j in zip(rows[0].tolist(), rows[1].tolist(), strict=True)
            ]
        else:
            out = [post(enc[i], None, True) for i in rows[0].tolist()]
        return _list_array([e.ids for e in out], self.np_ids), _list_array([e.type_ids for e in out], np.int8)

    def agrees_with_tokenizer(self) -> bool:
        """Whether this path gives `tokenizer(a, b, truncation=True)`'s ids on pairs that need truncation."""
        a, b = zip(*PROBES, strict=True)
        probes = pa.table({"pair_id": [str(i) for i in range(len(a))], "text_a": a, "text_b": b})
        plain = PlainEncoder(self.tokenizer, self.max_length, self.form, self.schema)
        return self.encode(probes).equals(plain.encode(probes))


class PlainEncoder:
    """The tokenizer's own batch call per batch (any tokenizer, slow Python ones included)."""

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, max_length: int, form: Form, schema: pa.Schema
    ) -> None:
        self.tokenizer, self.max_length, self.form, self.schema = tokenizer, max_length, form, schema

    def encode(self, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        table = _as_table(batch)
        if table.num_rows == 0:
            return self.schema.empty_table()
        frame = pl.from_arrow(table.select(["text_a", "text_b"]))
        a, b = frame["text_a"].to_list(), frame["text_b"].to_list()
        tok, length = self.tokenizer, self.max_length
        cols = _head(table, self.schema)
        raw_a = tok(a, add_special_tokens=False)["input_ids"]
        raw_b = tok(b, add_special_tokens=False)["input_ids"]
        ids = pa.list_(pa.int64())
        if self.form == "cross":
            for suffix, (x, y) in (("", (a, b)), ("_ba", (b, a))):
                enc = tok(x, y, truncation=True, max_length=length)
                types = enc.get("token_type_ids") or [[0] * len(i) for i in enc["input_ids"]]
                cols[f"input_ids{suffix}"] = pa.array(enc["input_ids"], ids)
                cols[f"token_type_ids{suffix}"] = pa.array(types, ids)
                cols[f"length{suffix}"] = pa.array([len(i) for i in enc["input_ids"]])
            special = tok.num_special_tokens_to_add(pair=True)
            flags = [len(x) + len(y) + special > length for x, y in zip(raw_a, raw_b, strict=True)]
        else:
            for name, texts in (("a", a), ("b", b)):
                enc = tok(texts, truncation=True, max_length=length)["input_ids"]
                cols[f"ids_{name}"] = pa.array(enc, ids)
                cols[f"length_{name}"] = pa.array([len(i) for i in enc])
            special = tok.num_special_tokens_to_add(pair=False)
            flags = [max(len(x), len(y)) + special > length for x, y in zip(raw_a, raw_b, strict=True)]
        cols["truncated"] = pa.array(flags, pa.bool_())
        return pa.table({f.name: cols[f.name] for f in self.schema}).cast(self.schema)
