"""Which training rows each epoch reads, and in which batches.

With `samples_per_epoch` unset an epoch is one pass over every row, as always. Set, an epoch reads
that many rows by walking a seeded permutation of all rows that continues from epoch to epoch (and
starts a fresh permutation when one is used up), so a night over a set of many millions of pairs has
a bounded time per epoch and still sees every pair once before any pair is seen twice.
"""

from __future__ import annotations

import numpy as np

from simpair.training.data import length_grouped_batches


def epoch_rows(n: int, samples: int | None, epoch: int, seed: int) -> np.ndarray | None:
    """The rows epoch `epoch` (1-based) reads, or None for all of them (unset, or not fewer than n)."""
    if samples is None or samples >= n:
        return None
    pos, end = (epoch - 1) * samples, epoch * samples
    parts = []
    while pos < end:
        cycle, offset = divmod(pos, n)
        take = min(end - pos, n - offset)
        parts.append(np.random.default_rng([seed, cycle]).permutation(n)[offset : offset + take])
        pos += take
    return np.concatenate(parts)


def epoch_batches(
    lengths: np.ndarray,
    batch_size: int,
    seed: int,
    group: bool,
    sources: np.ndarray | None,
    rows: np.ndarray | None,
) -> list[np.ndarray]:
    """Length-grouped batches of row indices over `rows` (None: every row)."""
    if rows is None:
        return length_grouped_batches(lengths, batch_size, seed, group, sources=sources)
    picked = sources[rows] if sources is not None else None
    batches = length_grouped_batches(lengths[rows], batch_size, seed, group, sources=picked)
    return [rows[b] for b in batches]
