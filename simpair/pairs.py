"""Identity of a text pair, shared by ingest (duplicates, leakage), evaluation and scoring.

A pair is the same pair whichever sentence comes first: paraphrase and similarity are symmetric, so
leakage checks must not be fooled by a swapped order.
"""

from __future__ import annotations

import hashlib


def pair_key(text_a: str, text_b: str) -> str:
    """Order-insensitive key of a cleaned pair (sha1 of the two texts sorted, joined by a NUL)."""
    first, second = sorted((text_a, text_b))
    return hashlib.sha1(f"{first}\x00{second}".encode()).hexdigest()


def ordered_pair_key(text_a: str, text_b: str) -> str:
    """Order-sensitive key: exact duplicates within a split are the same (a, b) in the same order."""
    return hashlib.sha1(f"{text_a}\x00{text_b}".encode()).hexdigest()
