"""A tokenizer's post-processing (special tokens, longest-first truncation) as numpy over flat ids.

Most post-processors (BERT's, RoBERTa's, any `TemplateProcessing`) put fixed special tokens around
each sequence: `prefix A suffix` for one text, `prefix A middle B suffix` for a pair, with one token
type per part. Read once from the backend's own output, that template lets a whole batch be truncated
and assembled with array gathers instead of one `post_process` call per row (the slowest step left
once each text is tokenized once). The truncation lengths follow the backend's longest-first rule
(`tokenizers`' `truncate_encodings`, right side). `FastEncoder` checks the result against the
tokenizer's own call before it trusts a template, and post-processes row by row where none is found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer


@dataclass(frozen=True)
class Part:
    """Special tokens of one fixed part of the template, with their token types."""

    ids: np.ndarray
    types: np.ndarray


@dataclass(frozen=True)
class Template:
    """`parts[0] A parts[1] (B parts[2])`; `seq_types` are the token types of A (and B)."""

    parts: tuple[Part, ...]
    seq_types: tuple[int, ...]

    @property
    def special(self) -> int:
        return sum(len(p.ids) for p in self.parts)


def read_template(post: Tokenizer, raw: Tokenizer, pair: bool) -> Template | None:
    """The backend's template, or None where its output is not fixed specials around each sequence."""
    encs = raw.encode_batch(["hello world", "a cat"], add_special_tokens=False)
    out = post.post_process(encs[0], encs[1] if pair else None, True)
    ids, types = out.ids, out.type_ids
    parts: list[Part] = []
    seq_types: list[int] = []
    pos = 0
    for enc in encs[: 2 if pair else 1]:
        seq = enc.ids
        start = next((i for i in range(pos, len(ids) - len(seq) + 1) if ids[i : i + len(seq)] == seq), None)
        if start is None or len(set(types[start : start + len(seq)])) != 1:
            return None
        parts.append(Part(np.array(ids[pos:start], np.int64), np.array(types[pos:start], np.int64)))
        seq_types.append(types[start])
        pos = start + len(seq)
    parts.append(Part(np.array(ids[pos:], np.int64), np.array(types[pos:], np.int64)))
    return Template(tuple(parts), tuple(seq_types))


def longest_first(n1: np.ndarray, n2: np.ndarray, room: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens kept of each text of a pair when `room` tokens are left (the backend's rule, verbatim)."""
    n1, n2 = n1.astype(np.int64), n2.astype(np.int64)
    swap = n1 > n2
    short = np.minimum(n1, n2)
    long_keep = np.where(short > room, short, np.maximum(short, room - short))
    over = short + long_keep > room
    short_keep = np.where(over, room // 2, short)
    long_keep = np.where(over, room // 2 + room % 2, long_keep)
    k1, k2 = np.where(swap, long_keep, short_keep), np.where(swap, short_keep, long_keep)
    fits = n1 + n2 <= room
    return np.where(fits, n1, np.minimum(n1, k1)), np.where(fits, n2, np.minimum(n2, k2))


def ragged_take(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of `arange(s, s + n)` for every (s, n), without a Python loop."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)


def assemble(
    template: Template,
    values: np.ndarray,
    offsets: np.ndarray,
    rows: tuple[np.ndarray, ...],
    max_length: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(ids, token types, row offsets) of every row; `rows` index the texts in (values, offsets).

    None when `max_length` leaves no room for text (the backend then warns and returns only specials).
    """
    room = max_length - template.special
    if room <= 0:
        return None
    lens = np.diff(offsets)
    if len(rows) == 2:
        keep: tuple[Any, ...] = longest_first(lens[rows[0]], lens[rows[1]], room)
    else:
        keep = (np.minimum(lens[rows[0]], room),)
    # one source buffer: the specials, then the texts' ids; every row is a run of segments in it
    special_ids = np.concatenate([p.ids for p in template.parts])
    part_starts = np.concatenate([[0], np.cumsum([len(p.ids) for p in template.parts])])
    src_ids = np.concatenate([special_ids.astype(values.dtype), values])
    n = len(rows[0])
    starts, lengths, kinds = [], [], []
    for k, part in enumerate(template.parts):
        starts.append(np.full(n, part_starts[k]))
        lengths.append(np.full(n, len(part.ids)))
        kinds.append(part.types[0] if len(set(part.types.tolist())) == 1 else None)
        if k < len(rows):
            starts.append(len(special_ids) + offsets[rows[k]])
            lengths.append(keep[k])
            kinds.append(template.seq_types[k])
    seg_starts = np.stack(starts, axis=1).ravel()
    seg_lengths = np.stack(lengths, axis=1).ravel().astype(np.int64)
    take = ragged_take(seg_starts.astype(np.int64), seg_lengths)
    if all(kind is not None for kind in kinds):  # each segment one token type: repeat it, no gather
        seg_types = np.tile(np.array(kinds, np.int8), n)
        types = np.repeat(seg_types, seg_lengths)
    else:  # a part whose specials mix token types: read them where they are
        src_types = np.concatenate([p.types for p in template.parts]).astype(np.int8)
        seg_types = np.tile(np.array([-1 if kind is None else kind for kind in kinds], np.int8), n)
        types = np.repeat(seg_types, seg_lengths)
        special = take < len(special_ids)
        types[special] = src_types[take[special]]
    row_lengths = np.stack(lengths, axis=1).sum(axis=1)
    row_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(row_lengths, out=row_offsets[1:])
    return src_ids[take], types, row_offsets
