"""Tokenizer loading and fingerprinting.

The fingerprint keys the pre-tokenized cache: two tokenizers that map text to the same ids share it,
and any change of vocabulary, normaliser or special tokens makes a new one.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase


def load_tokenizer(name_or_path: str | Path) -> PreTrainedTokenizerBase:
    """Any local directory or hub id (offline: hub ids only resolve from the local cache)."""
    return AutoTokenizer.from_pretrained(str(name_or_path), trust_remote_code=False)


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """sha1 (16 hex chars) of everything that decides the ids: pipeline, vocabulary, special tokens."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        body = _canonical_state(backend.to_str())
    else:  # slow tokenizers: the vocabulary and the class decide the ids
        body = json.dumps(sorted(tokenizer.get_vocab().items()))
    special = json.dumps(
        {
            "class": type(tokenizer).__name__,
            "special": {k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())},
            "padding_side": tokenizer.padding_side,
        },
        sort_keys=True,
    )
    return hashlib.sha1((body + special).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=8)
def _canonical_state(serialized: str) -> str:
    """The backend's state as sorted JSON, without truncation and padding.

    Truncation/padding state changes with every call that passes `truncation=`; it is a call option,
    not part of the mapping from text to ids, so it must not change the fingerprint. Cached by the
    serialized text: sorting a 30k-entry vocabulary costs 0.1-0.5 s, and a night fingerprints the
    same tokenizer for every split it pre-tokenizes and every model it saves.
    """
    state = json.loads(serialized)
    state.pop("truncation", None)
    state.pop("padding", None)
    return json.dumps(state, sort_keys=True)
