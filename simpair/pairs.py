"""Identity of a text pair, shared by ingest (duplicates, leakage), evaluation and scoring.

A pair is the same pair whichever sentence comes first: paraphrase and similarity are symmetric, so
leakage checks must not be fooled by a swapped order.
"""

from __future__ import annotations

import hashlib

import polars as pl


def pair_key(text_a: str, text_b: str) -> str:
    """Order-insensitive key of a cleaned pair (sha1 of the two texts sorted, joined by a NUL)."""
    first, second = sorted((text_a, text_b))
    return hashlib.sha1(f"{first}\x00{second}".encode()).hexdigest()


def ordered_pair_key(text_a: str, text_b: str) -> str:
    """Order-sensitive key: exact duplicates within a split are the same (a, b) in the same order."""
    return hashlib.sha1(f"{text_a}\x00{text_b}".encode()).hexdigest()


def sorted_texts(text_a: str, text_b: str) -> tuple[pl.Expr, pl.Expr]:
    """The two texts of a pair in `pair_key`'s order, as polars expressions (named lo, hi).

    Comparing (lo, hi) exactly is comparing `pair_key`s without hashing: polars orders strings by
    their UTF-8 bytes, which is Python's code-point order. (Cleaned texts hold no NUL, the separator
    `pair_key` hashes, so no two different (lo, hi) share a key.)
    """
    return (
        pl.min_horizontal(text_a, text_b).alias("lo"),
        pl.max_horizontal(text_a, text_b).alias("hi"),
    )


def pair_keys(lo: pl.Series, hi: pl.Series) -> pl.Series:
    """`pair_key` of each (lo, hi) from `sorted_texts`, so sha1 is paid only for rows that need it."""
    texts = pl.select(pl.concat_str([pl.lit(lo), pl.lit("\x00"), pl.lit(hi)])).to_series()
    unique = texts.unique()
    digests = pl.Series([hashlib.sha1(t.encode()).hexdigest() for t in unique.to_list()], dtype=pl.Utf8)
    return texts.replace_strict(unique, digests, return_dtype=pl.Utf8).alias("pair_key")
