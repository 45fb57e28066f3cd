"""Pretokenizing by distinct words gives the tokenizer's own ids, pair by pair, in both forms."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from simpair.models.tiny import default_backbone
from simpair.models.tokenizer import load_tokenizer
from simpair.pair_tokens.encode import FastEncoder, encoder_for, splits_on_spaces

WORDS = [
    "the", "cat", "sat", "on", "a", "mat.", "Hello,", "world!", "re-tokenize", "(brackets)", "don't",
    "café", "naïve", "Ünïcödé", "résumé", "東京", "中文字", "ÅNGSTRÖM", "straße", "😀", "e\u0301",
    "[SEP]", "[MASK]", "x" * 120, "supercalifragilisticexpialidocious", "3.14159", "$100", "#tag",
    "\u00a0", "\t", "\n", "a\u200bb", "ctrl\x00z", "\x1f", "ǅ", "Σίσυφος", "ΟΔΥΣΣΕΥΣ", "İstanbul",
]  # fmt: skip
EDGE = ["", " ", "  ", "\t", " leading", "trailing ", "a  b   c", "\u00a0", "x" * 300]


def _texts(count: int, seed: int) -> list[str]:
    """Random sentences of these words, with random runs of spaces; some long enough to truncate."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n = rng.choice([1, 3, 8, 15, 40, 90])
        parts = [rng.choice(WORDS) for _ in range(n)]
        out.append("".join(p + " " * rng.choice([1, 1, 1, 2, 0]) for p in parts))
        if i < len(EDGE):
            out[-1] = EDGE[i]
    return out


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201
    return load_tokenizer(default_backbone())


def _pairs(count: int = 300) -> pa.Table:
    a, b = _texts(count, 1), _texts(count, 2)
    b[-5:] = a[-5:]  # a few texts that repeat within the batch
    return pa.table({"pair_id": [str(i) for i in range(count)], "text_a": a, "text_b": b})


@pytest.mark.parametrize("max_length", [16, 128])
@pytest.mark.parametrize("form", ["cross", "bi"])
def test_word_path_equals_the_tokenizer_pair_by_pair(tokenizer, form: str, max_length: int) -> None:  # noqa: ANN001
    table = _pairs()
    encoder = encoder_for(tokenizer, max_length, form)  # type: ignore[arg-type]
    assert isinstance(encoder, FastEncoder) and encoder.by_words
    rows = encoder.encode(table).to_pylist()
    truncated = 0

    def call(*texts: str, **kw: object) -> dict:  # a batch of one: a single call drops an empty pair text
        return {k: v[0] for k, v in tokenizer(*[[t] for t in texts], **kw).items()}

    for a, b, row in zip(table["text_a"].to_pylist(), table["text_b"].to_pylist(), rows, strict=True):
        if form == "cross":
            for suffix, (x, y) in (("", (a, b)), ("_ba", (b, a))):
                enc = call(x, y, truncation=True, max_length=max_length)
                assert row[f"input_ids{suffix}"] == enc["input_ids"], (x, y)
                assert row[f"token_type_ids{suffix}"] == enc["token_type_ids"]
                assert row[f"length{suffix}"] == len(enc["input_ids"])
            full = len(call(a, b)["input_ids"])
        else:
            for side, text in (("a", a), ("b", b)):
                enc = call(text, truncation=True, max_length=max_length)
                assert row[f"ids_{side}"] == enc["input_ids"], text
                assert row[f"length_{side}"] == len(enc["input_ids"])
            full = max(len(call(a)["input_ids"]), len(call(b)["input_ids"]))
        assert row["truncated"] == (full > max_length)
        truncated += row["truncated"]
    assert 0 < truncated < len(rows)  # both kinds of row were checked


@pytest.mark.parametrize("form", ["cross", "bi"])
def test_word_path_equals_the_text_path_in_threads(tokenizer, form: str) -> None:  # noqa: ANN001
    """Enough distinct words to take the threaded encode; the same table as text by text."""
    table = _pairs(1500)
    a = [f"{t} w{i} v{i * 7}" for i, t in enumerate(table["text_a"].to_pylist())]
    table = table.set_column(1, "text_a", pa.array(a))
    schema = encoder_for(tokenizer, 64, form).schema  # type: ignore[arg-type]
    words = FastEncoder(tokenizer, 64, form, schema, threads=2)  # type: ignore[arg-type]
    texts = FastEncoder(tokenizer, 64, form, schema, threads=1, by_words=False)  # type: ignore[arg-type]
    assert words.by_words and not texts.by_words
    assert words.encode(table).equals(texts.encode(table))


def test_byte_level_tokenizers_keep_the_text_path() -> None:
    """Byte-level BPE tokenizes the space into the next word: splitting on spaces would change ids."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(_texts(200, 3), trainer)
    assert not splits_on_spaces(backend)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend)
    whole = backend.encode("the cat sat").ids
    pieces = [i for w in ("the", "cat", "sat") for i in backend.encode(w).ids]
    assert whole != pieces
    table = _pairs(50)
    encoder = encoder_for(tok, 32, "bi")
    if isinstance(encoder, FastEncoder):
        assert not encoder.by_words
    rows = encoder.encode(table).to_pylist()
    for text, row in zip(table["text_a"].to_pylist(), rows, strict=True):
        assert row["ids_a"] == tok(text, truncation=True, max_length=32)["input_ids"]


def test_words_keep_their_ids_across_batches_and_the_cache_stays_bounded(tokenizer) -> None:  # noqa: ANN001
    """Batches after the first tokenize only the words no earlier batch had; past its limit the cache
    starts afresh. Either way every batch gives what a fresh encoder gives it."""
    schema = encoder_for(tokenizer, 64, "cross").schema
    warm = FastEncoder(tokenizer, 64, "cross", schema)
    warm.words.limit = 400
    batches = [_pairs(120).slice(i, 40) for i in range(0, 120, 40)]
    batches.append(pa.table({"pair_id": ["n"], "text_a": ["brand new words"], "text_b": ["the cat sat"]}))
    sizes = []
    for batch in batches + batches[:1]:
        fresh = FastEncoder(tokenizer, 64, "cross", schema)
        assert warm.encode(batch).equals(fresh.encode(batch))
        sizes.append(len(warm.words.index))
    assert max(sizes) <= warm.words.limit
    assert sizes[-2] == sizes[-3] + 3  # only the three new words were added
    assert (
        warm.pairs(["the cat sat"], ["brand new words"])[0].ids.tolist()
        == (tokenizer("the cat sat", "brand new words")["input_ids"])
    )
