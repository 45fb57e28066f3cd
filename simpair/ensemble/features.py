"""Lexical-overlap features that are cheap, model-free and bounded in [0, 1].

They add what neither encoder sees directly: how many word types two sentences literally share and
how different their lengths are (a long sentence that contains a short one is rarely a paraphrase).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

LEXICAL_FEATURES = ("lexical:jaccard", "lexical:length_ratio")
_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def lexical_features(text_a: Sequence[str], text_b: Sequence[str]) -> np.ndarray:
    """(n, 2) float64: word-type Jaccard overlap, and shorter / longer word-type count."""
    out = np.zeros((len(text_a), len(LEXICAL_FEATURES)), dtype=np.float64)
    for i, (a, b) in enumerate(zip(text_a, text_b, strict=True)):
        wa, wb = _words(a), _words(b)
        union = len(wa | wb)
        out[i, 0] = len(wa & wb) / union if union else 1.0
        longest = max(len(wa), len(wb))
        out[i, 1] = min(len(wa), len(wb)) / longest if longest else 1.0
    return out
