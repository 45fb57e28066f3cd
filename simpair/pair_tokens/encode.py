"""Text pairs -> token ids through the fast tokenizer's Rust backend: the token cache's columns and
the model's inputs when scoring, one code path for both.

Each distinct text of a batch is tokenized once, without special tokens or truncation (in threads:
the backend releases the GIL). Where the backend tokenizes each ' '-separated word on its own
(WordPiece behind BERT-style normalization: `splits_on_spaces`), each distinct word is tokenized once
instead and a text's ids are gathered from its words' with numpy: texts that never repeat still share
their words, so this is what keeps unique texts fast. Words keep their ids across batches
(`WordIds`, up to `WORD_CACHE_WORDS` words, then started afresh: memory stays flat), so a batch
tokenizes only the words no earlier batch had, and those in a few Rust calls: a group of words joined
by ' ' is encoded as one text and each token handed back to the word its offsets fall in (one
Encoding per word cost five times more). A text's length gives the `truncated` flag. Special tokens
and truncation are then added the way `tokenizer(a, b, truncation=True, max_length=L)` adds them
inside: by the backend's template over flat numpy arrays (`simpair.pair_tokens.template`), or, where
the post-processor has no fixed template, by the backend's own `post_process` row by row.

Two outputs from the same work: `encode` gives a pretokenize batch's cache columns (cross: both
orders of each pair; bi: each text alone) as Arrow arrays built from flat numpy arrays plus offsets,
never Python lists of lists; `pairs`, `texts` and `lengths` give scoring's model inputs as flat numpy
(`Encoded`), which the scoring loop pads batch by batch (`simpair.models.token_stream`). Tokenizers
without a Rust backend (or where this path would not give the tokenizer's own ids, checked once on
probe pairs) take the plain path through the tokenizer's own call.
"""

from __future__ import annotations

import gc
import json
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any, Literal, Protocol

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerBase

from simpair.pair_tokens.columns import Ragged
from simpair.pair_tokens.template import assemble, ragged_take, read_template

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
# distinct words whose ids an encoder keeps across batches (~40 MB with their ids); past it, the
# cache starts afresh, so memory stays flat however many batches pass
WORD_CACHE_WORDS = 1 << 18
THREADED_WORDS = 4096  # fewer new words than this are encoded in one call (threads cost more)


@dataclass(frozen=True)
class Encoded:
    """One model input for a run of rows, flat: row i is `ids[offsets[i]:offsets[i + 1]]`, with its
    token types where the model reads them (None where the tokenizer makes none, RoBERTa-style)."""

    ids: np.ndarray
    offsets: np.ndarray
    types: np.ndarray | None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets).astype(np.int64)


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
    """What pretokenize (`encode`) and scoring (`pairs`, `texts`, `lengths`) ask of an encoder."""

    schema: pa.Schema

    def encode(self, batch: pa.RecordBatch | pa.Table) -> pa.Table: ...

    def pairs(self, text_a: Sequence[str], text_b: Sequence[str], orders: int = 1) -> list[Encoded]: ...

    def texts(self, texts: Sequence[str]) -> Encoded: ...

    def lengths(self, texts: Sequence[str]) -> np.ndarray: ...


def encoder_for(tokenizer: PreTrainedTokenizerBase, max_length: int, form: Form) -> BatchEncoder:
    """The fast encoder where it gives the tokenizer's own ids on the probes, else the plain one."""
    schema = token_schema(form, ids_type(tokenizer))
    if getattr(tokenizer, "backend_tokenizer", None) is not None:
        fast = FastEncoder(tokenizer, max_length, form, schema)
        if fast.agrees_with_tokenizer():
            return fast
    return PlainEncoder(tokenizer, max_length, form, schema)


def reads_token_types(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the model is handed token type ids (what the tokenizer's own call returns)."""
    return "token_type_ids" in getattr(tokenizer, "model_input_names", ["token_type_ids"])


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


def _ragged(lists: Sequence[list[int]], dtype: type[np.generic]) -> Ragged:
    """Python int lists -> one flat numpy buffer plus int64 offsets (overflow raises)."""
    lengths = np.fromiter(map(len, lists), np.int64, count=len(lists))
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.fromiter(chain.from_iterable(lists), dtype, count=int(offsets[-1]))
    return Ragged(values, offsets)


def _list_array(values: np.ndarray, offsets: np.ndarray) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))


def _encoded(lists: Sequence[list[int]], types: Sequence[list[int]] | None, dtype: Any) -> Encoded:
    ids = _ragged(lists, dtype)
    return Encoded(ids.values, ids.offsets, _ragged(types, np.int8).values if types is not None else None)


def _head(table: pa.Table, schema: pa.Schema) -> dict[str, Any]:
    n = table.num_rows
    out: dict[str, Any] = {}
    for name in ("pair_id", "label", "score"):
        kind = schema.field(name).type
        out[name] = table[name].cast(kind) if name in table.column_names else pa.nulls(n, kind)
    return out


def _as_table(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    return pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch


def _strings(texts: Sequence[str] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        return texts.cast(pa.large_string()).combine_chunks()
    if isinstance(texts, pa.Array):
        return texts.cast(pa.large_string())
    return pa.array(texts if isinstance(texts, list) else list(texts), pa.large_string())


def encode_words(raw: Tokenizer, words: list[str], threads: int = 1) -> Ragged:
    """Each word's ids (no specials), end to end: words joined by ' ' and encoded as one text per
    thread, each token handed back to the word its start offset falls in.

    Only for backends that tokenize each ' '-separated piece on its own (`splits_on_spaces`): then the
    joined text's tokens are its words' tokens in order, and one Encoding replaces thousands."""
    groups = 1 if threads == 1 or len(words) < THREADED_WORDS else threads
    step = max(1, -(-len(words) // groups))
    parts = [words[i : i + step] for i in range(0, len(words), step)]

    def one(part: list[str]) -> tuple[np.ndarray, np.ndarray]:
        enc = raw.encode_batch([" ".join(part)], add_special_tokens=False)[0]  # the GIL is released
        ids = np.asarray(enc.ids, np.int64)
        sizes = np.fromiter(map(len, part), np.int64, count=len(part))
        starts = np.zeros(len(part), np.int64)
        np.cumsum(sizes[:-1] + 1, out=starts[1:])
        token_starts = np.fromiter((o[0] for o in enc.offsets), np.int64, count=len(ids))
        owner = np.searchsorted(starts, token_starts, side="right") - 1
        return ids, np.bincount(owner, minlength=len(part))

    if len(parts) > 1:
        with ThreadPoolExecutor(len(parts)) as pool:
            done = list(pool.map(one, parts))
    else:
        done = [one(p) for p in parts]
    ids = np.concatenate([d[0] for d in done]) if done else np.zeros(0, np.int64)
    counts = np.concatenate([d[1] for d in done]) if done else np.zeros(0, np.int64)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Ragged(ids, offsets)


class WordIds:
    """The ids of every distinct word an encoder has met, kept across batches (`WORD_CACHE_WORDS`).

    Real text never repeats a sentence but keeps repeating its words: after the first batches nearly
    every word of a new batch is known, so tokenizing a batch costs a dictionary lookup per distinct
    word and the Rust backend sees only the new ones."""

    def __init__(self, raw: Tokenizer, dtype: Any, threads: int, limit: int = WORD_CACHE_WORDS) -> None:
        self.raw, self.dtype, self.threads, self.limit = raw, dtype, threads, limit
        self.clear()

    def clear(self) -> None:
        self.index: dict[str, int] = {}
        self.values = np.zeros(0, self.dtype)
        self.starts = np.zeros(0, np.int64)
        self.lens = np.zeros(0, np.int64)

    def positions(self, words: list[str]) -> np.ndarray:
        """Where each word's ids are (`values[starts[p]:starts[p] + lens[p]]`), new words encoded now."""
        get = self.index.get
        pos = np.fromiter((get(w, -1) for w in words), np.int64, count=len(words))
        new = np.flatnonzero(pos < 0)
        if not new.size:
            return pos
        if len(self.index) + new.size > self.limit:
            self.clear()
            pos[:] = -1
            new = np.arange(len(words))
        fresh = [words[i] for i in new.tolist()]
        ids = encode_words(self.raw, fresh, self.threads)
        base, size = len(self.lens), len(self.values)
        self.values = np.concatenate([self.values, ids.values.astype(self.dtype)])
        self.starts = np.concatenate([self.starts, ids.offsets[:-1] + size])
        self.lens = np.concatenate([self.lens, np.diff(ids.offsets)])
        self.index.update(zip(fresh, range(base, base + len(fresh)), strict=True))
        pos[new] = np.arange(base, base + len(fresh))
        return pos


class FastEncoder:
    """Distinct texts (or, where the backend allows, distinct ' '-separated words) encoded once, in
    threads, then truncated and templated over flat arrays.

    Texts that never repeat (real logs) still share most of their words: tokenizing each distinct word
    once (`WordIds`, kept across batches) and gathering the texts' ids from the words' with numpy does
    a fraction of the Rust work of tokenizing every text (`splits_on_spaces` says when that gives the
    same ids). Thread-safe: the backends are private copies with fixed settings, and the word cache is
    used under a lock."""

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
        self.words = WordIds(self.raw, self.np_ids, self.threads)
        self.with_types = reads_token_types(tokenizer)
        self._lock = threading.Lock()

    def _encode_texts(self, texts: list[str]) -> list[Any]:
        encode = getattr(self.raw, "encode_batch_fast", self.raw.encode_batch)
        if self.threads == 1 or len(texts) < 2048:
            return encode(texts, add_special_tokens=False)
        step = -(-len(texts) // self.threads)
        chunks = [texts[i : i + step] for i in range(0, len(texts), step)]
        with ThreadPoolExecutor(self.threads) as pool:
            parts = list(pool.map(lambda c: encode(c, add_special_tokens=False), chunks))
        return [e for part in parts for e in part]

    def _distinct(self, columns: list[pa.Array]) -> tuple[list[Any], Ragged, list[np.ndarray]]:
        """(the distinct texts' Encodings where the row-by-row path needs them, else []; their raw ids;
        each column's row -> distinct text). Called under the lock."""
        n = [len(c) for c in columns]
        both = pa.concat_arrays(columns).dictionary_encode()
        codes = both.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        cuts = np.cumsum([0, *n])
        rows = [codes[cuts[i] : cuts[i + 1]] for i in range(len(columns))]
        enc: list[Any] = []
        if self.by_words:
            return enc, self._word_ids(both.dictionary), rows
        enc = self._encode_texts(both.dictionary.to_pylist())
        raw = _ragged([e.ids for e in enc], self.np_ids)
        if self.template is not None:
            enc = []  # the template needs only the flat ids: free the Encodings' tokens now
        return enc, raw, rows

    def encode(self, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        table = _as_table(batch)
        cols = _head(table, self.schema)
        with self._lock, _gc_paused():
            enc, raw, (ca, cb) = self._distinct([_strings(table[c]) for c in ("text_a", "text_b")])
            lens = np.diff(raw.offsets)
            if self.form == "bi":
                for side, rows in (("a", ca), ("b", cb)):
                    ids, _, offsets = self._assemble(enc, raw, (rows,))
                    cols[f"ids_{side}"] = _list_array(ids, offsets)
                    cols[f"length_{side}"] = pa.array(np.diff(offsets).astype(np.int32))
                truncated = np.maximum(lens[ca], lens[cb]) + self.special > self.max_length
            else:
                for suffix, rows in (("", (ca, cb)), ("_ba", (cb, ca))):
                    ids, types, offsets = self._assemble(enc, raw, rows)
                    cols[f"input_ids{suffix}"] = _list_array(ids, offsets)
                    cols[f"token_type_ids{suffix}"] = _list_array(types, offsets)
                    cols[f"length{suffix}"] = pa.array(np.diff(offsets).astype(np.int32))
                truncated = lens[ca] + lens[cb] + self.special > self.max_length
        cols["truncated"] = pa.array(truncated)
        return pa.table({f.name: cols[f.name] for f in self.schema}).cast(self.schema)

    def pairs(self, text_a: Sequence[str], text_b: Sequence[str], orders: int = 1) -> list[Encoded]:
        """The joint input `a, b` of each pair as the model reads it (`orders=2`: and `b, a`)."""
        with self._lock, _gc_paused():
            enc, raw, (ca, cb) = self._distinct([_strings(text_a), _strings(text_b)])
            out = []
            for rows in ((ca, cb), (cb, ca))[:orders]:
                ids, types, offsets = self._assemble(enc, raw, rows)
                out.append(Encoded(ids, offsets, types if self.with_types else None))
        return out

    def texts(self, texts: Sequence[str]) -> Encoded:
        """Each text alone as the model reads it (a bi-encoder's sentences)."""
        with self._lock, _gc_paused():
            enc, raw, (rows,) = self._distinct([_strings(texts)])
            ids, types, offsets = self._assemble(enc, raw, (rows,))
        return Encoded(ids, offsets, types if self.with_types else None)

    def lengths(self, texts: Sequence[str]) -> np.ndarray:
        """Tokens of each text without special tokens or truncation (what the truncation flag reads)."""
        with self._lock, _gc_paused():
            _, raw, (rows,) = self._distinct([_strings(texts)])
        return np.diff(raw.offsets)[rows]

    def _word_ids(self, texts: pa.Array) -> Ragged:
        """Each text's ids (no specials, untruncated) as its ' '-separated words' ids end to end.

        Split and dictionary-encoded by Arrow, each distinct word looked up in (or added to) the word
        cache, then one ragged gather: no Python object per text or per word occurrence."""
        words = pc.split_pattern(texts.cast(pa.large_string()), " ")
        text_words = words.offsets.to_numpy().astype(np.int64)  # words of text i: [o[i], o[i+1])
        codes = pc.list_flatten(words).dictionary_encode()
        occ = codes.indices.to_numpy(zero_copy_only=False)
        cache = self.words
        at = cache.positions(codes.dictionary.to_pylist())  # per distinct word: gathers stay small
        occ_lens = cache.lens[at][occ]
        values = cache.values[ragged_take(cache.starts[at][occ], occ_lens)]
        ends = np.zeros(len(occ) + 1, np.int64)
        np.cumsum(occ_lens, out=ends[1:])
        return Ragged(values, ends[text_words])

    def _assemble(
        self, enc: list[Any], raw: Ragged, rows: tuple[np.ndarray, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, token types, row offsets) of each row: by the template where there is one, else row
        by row."""
        built = (
            assemble(self.template, raw.values, raw.offsets, rows, self.max_length) if self.template else None
        )
        if built is not None:
            ids, types, row_offsets = built
            return ids, types, row_offsets.astype(np.int64)
        post = self.post.post_process
        if len(rows) == 2:
            out = [
                post(enc[i], enc[j], True) for i, j in zip(rows[0].tolist(), rows[1].tolist(), strict=True)
            ]
        else:
            out = [post(enc[i], None, True) for i in rows[0].tolist()]
        ids = _ragged([e.ids for e in out], self.np_ids)
        return ids.values, _ragged([e.type_ids for e in out], np.int8).values, ids.offsets

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
        self.with_types = reads_token_types(tokenizer)
        self._lock = threading.Lock()  # a fast tokenizer's call sets its truncation: one call at a time

    def encode(self, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        table = _as_table(batch)
        if table.num_rows == 0:
            return self.schema.empty_table()
        frame = pl.from_arrow(table.select(["text_a", "text_b"]))
        a, b = frame["text_a"].to_list(), frame["text_b"].to_list()
        tok, length = self.tokenizer, self.max_length
        cols = _head(table, self.schema)
        with self._lock:
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

    def pairs(self, text_a: Sequence[str], text_b: Sequence[str], orders: int = 1) -> list[Encoded]:
        a, b = list(text_a), list(text_b)
        out = []
        with self._lock:
            for x, y in ((a, b), (b, a))[:orders]:
                enc = self.tokenizer(x, y, truncation=True, max_length=self.max_length)
                types = enc.get("token_type_ids") if self.with_types else None
                out.append(_encoded(enc["input_ids"], types, np.int64))
        return out

    def texts(self, texts: Sequence[str]) -> Encoded:
        with self._lock:
            enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return _encoded(enc["input_ids"], enc.get("token_type_ids") if self.with_types else None, np.int64)

    def lengths(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return np.fromiter(map(len, ids), np.int64, count=len(ids))
