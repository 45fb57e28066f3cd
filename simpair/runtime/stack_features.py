"""Extra stack features: lexical overlap (model-free) and products of the members' outputs.

Lexical features add what neither encoder sees directly: how many word types two sentences literally
share and how different their lengths are (a long sentence that contains a short one is rarely a
paraphrase). Member products (each output squared, and every pair multiplied) let a linear combiner
bend: a cross-encoder's logit is not linear in graded similarity, and two members that agree are
more trustworthy than their average says. On STS-B dev they raised out-of-fold Spearman in every
member set tried (docs/experiments.md).
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


def product_pairs(members: int) -> list[tuple[int, int]]:
    """(i, j), i <= j: the squares and pairwise products of `members` outputs, in column order."""
    return [(i, j) for i in range(members) for j in range(i, members)]


def product_name(i: int, j: int) -> str:
    return f"product:{i}*{j}"


def parse_product(name: str) -> tuple[int, int]:
    """`product:i*j` -> (i, j); a clear error for anything else (a hand-edited stack.json)."""
    left, _, right = name.removeprefix("product:").partition("*")
    try:
        return int(left), int(right)
    except ValueError:
        raise ValueError(f"stack feature {name!r}: expected product:<i>*<j>") from None
