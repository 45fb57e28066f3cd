"""What a batch of pairs looked like, in bounded memory: the profile a drift test compares.

A `Profile` is the same record for a model version's reference (built once, on the dev pairs the
version was gated on) and for a scoring run's traffic (built chunk by chunk while the run scores):

- `histograms`: fixed-edge histograms (`Histogram`), so 1M or 100M pairs cost the same memory and two
  profiles from different runs merge and compare bin for bin. The edges are chosen per statistic, never
  from the data:
  - `"tokens"`: word pieces of each text (no special tokens), both sides of every pair;
  - `"truncated"`: one 0/1 value per pair, 1 when the model reads a cut input (a cross-encoder reads
    both texts in one sequence of `max_length`, a bi-encoder each text alone), so `counts[1]` is the
    number of pairs cut at `max_length`;
  - `"rare"`: per text, the share of its word pieces that are `[UNK]` or word fragments (WordPiece
    `##` continuations, or pieces without the word-start mark in SentencePiece vocabularies): names,
    codes, typos and foreign words the vocabulary cannot hold whole;
  - `"score"`: the model's score of each pair, in [0, 1].
- `positives`: pairs at or above the model's threshold (the positive-label rate is `positives / n_pairs`).
- `vectors`: for bi-encoders (and a cascade's bi stage), a `VectorSample` of at most 512 sentence
  vectors, a uniform sample whatever the number of rows, for the two-sample test on meaning.
- `health` (traffic): the run's counts `rows_in`, `rejected`, `truncated`, `quarantined`,
  `duplicates` and its speed `pairs_per_s`.

API used by registration, model import and scoring:

- `Histogram(edges, counts)`: `add(values)`, `merge(other)`, `total`, `share()`.
- `VectorSample(k=512, seed=0)`: `add(vectors)`, `merge(other)`, `array()`. Each row's priority is a
  seeded hash of the row's own bytes and the sample keeps the k smallest, so merging the samples of
  any split of the rows into chunks gives exactly the sample of one pass over all of them.
- `Profile`: `save(dir)` / `Profile.load(dir)` (`profile.json` plus `vectors.npy` beside it: JSON and
  NumPy's format, never pickle), `merge(other)`, `rate(name)`, `positive_rate`.
- `ProfileBuilder(tokenizer, max_length, form, threshold, kind, model=None, version=None)`:
  `add(text_a, text_b, scores, vectors=None)` per chunk, `set_health(...)`, then `finish(embed=None)`.
  A bi-encoder builder that is given no vectors keeps a hash-chosen sample of the texts instead and
  `finish(embed=predictor.embed)` embeds those few hundred texts at the end, so scoring never has to
  hand its embeddings over.
- `reference_profile(predictor_or_model_dir, dev_pairs, threshold, ...)`: scores the dev pairs with the
  model (through `simpair.runtime.loader.load_predictor`) and builds the version's reference.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from simpair.atomic import commit, temp_path

PROFILE_FILE = "profile.json"
VECTORS_FILE = "vectors.npy"
SAMPLE_SIZE = 512

# Fixed edges per statistic (never from the data): every profile of every run bins the same way.
# Token lengths: one bin per length up to 64 (so the binned KS is exact there), then coarser to 1024;
# values beyond the last edge land in the last bin.
TOKEN_EDGES: list[float] = [
    *range(0, 65),
    *range(72, 129, 8),
    *range(160, 257, 32),
    384.0,
    512.0,
    1024.0,
]
TOKEN_EDGES = [float(e) for e in TOKEN_EDGES]
SHARE_EDGES: list[float] = [round(i / 40, 6) for i in range(41)]  # shares and scores in [0, 1]
FLAG_EDGES: list[float] = [0.0, 0.5, 1.0]
EDGES: dict[str, list[float]] = {
    "tokens": TOKEN_EDGES,
    "truncated": FLAG_EDGES,
    "rare": SHARE_EDGES,
    "score": SHARE_EDGES,
}
HEALTH_KEYS = ("rows_in", "rejected", "truncated", "quarantined", "duplicates", "pairs_per_s")


class Histogram(BaseModel):
    """Counts over fixed edges; values outside the edges count in the outer bins (the tails stay seen)."""

    edges: list[float]
    counts: list[int] = Field(default_factory=list)

    def model_post_init(self, _context: Any) -> None:
        if len(self.edges) < 2 or any(b <= a for a, b in itertools.pairwise(self.edges)):
            raise ValueError(f"histogram edges must rise, at least two of them: {self.edges[:5]}...")
        if not self.counts:
            self.counts = [0] * (len(self.edges) - 1)
        if len(self.counts) != len(self.edges) - 1:
            raise ValueError(f"{len(self.counts)} counts for {len(self.edges) - 1} bins")

    @classmethod
    def of(cls, statistic: str) -> Histogram:
        """An empty histogram with the statistic's fixed edges."""
        return cls(edges=EDGES[statistic])

    @property
    def total(self) -> int:
        return int(sum(self.counts))

    def add(self, values: np.ndarray) -> Histogram:
        """Count `values` (NaN skipped); returns self so calls chain."""
        values = np.asarray(values, dtype=np.float64).ravel()
        values = values[~np.isnan(values)]
        if values.size:
            edges = np.asarray(self.edges)
            # bin i holds edges[i] <= v < edges[i+1]; the last bin also holds its right edge and beyond
            idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
            added = np.bincount(idx, minlength=len(edges) - 1)
            self.counts = (np.asarray(self.counts, dtype=np.int64) + added).tolist()
        return self

    def merge(self, other: Histogram) -> Histogram:
        """The histogram of both batches (the same edges, or a ValueError: profiles of two binnings
        do not compare)."""
        if self.edges != other.edges:
            raise ValueError("histograms with different edges do not merge")
        return Histogram(
            edges=list(self.edges), counts=[a + b for a, b in zip(self.counts, other.counts, strict=True)]
        )

    def share(self) -> np.ndarray:
        """Counts as shares of the total (zeros when empty)."""
        counts = np.asarray(self.counts, dtype=np.float64)
        return counts / counts.sum() if counts.sum() else counts

    def mean(self) -> float:
        """The mean from bin midpoints (the last bin counts at its left edge): a figure for plots."""
        if not self.total:
            return float("nan")
        edges = np.asarray(self.edges)
        mid = (edges[:-1] + edges[1:]) / 2
        mid[-1] = edges[-2]
        return float((mid * self.share()).sum())


def _priorities(rows: np.ndarray, seed: int) -> np.ndarray:
    """A seeded hash of each row's bytes as uint64: the same row gets the same priority in any chunk."""
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=np.uint64)
    words = np.ascontiguousarray(rows, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rng = np.random.default_rng(seed)
    mult = rng.integers(1, 2**63, size=words.shape[1], dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        h = (words * mult).sum(axis=1, dtype=np.uint64)
        # splitmix64 finaliser: spreads the sum over all bits so "k smallest" is a uniform choice
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


class VectorSample:
    """A uniform sample of at most `k` vectors out of every row added, mergeable across chunks.

    Bottom-k sampling: each row's priority is a seeded hash of its bytes, and the sample is the k rows
    with the smallest priorities. That is a uniform sample of the distinct rows, its memory is k rows
    whatever the number added, and `a.merge(b)` equals the sample of one pass over both (rows that
    repeat, the same sentence scored twice, get one place).
    """

    def __init__(self, k: int = SAMPLE_SIZE, seed: int = 0) -> None:
        self.k, self.seed = k, seed
        self.seen = 0
        self._rows: np.ndarray | None = None
        self._prio = np.zeros(0, dtype=np.uint64)

    def add(self, vectors: np.ndarray) -> VectorSample:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a 2-d array (rows, dim), got shape {vectors.shape}")
        if vectors.shape[0] == 0:
            return self
        if self._rows is not None and vectors.shape[1] != self._rows.shape[1]:
            raise ValueError(
                f"vectors of dim {vectors.shape[1]} added to a sample of dim {self._rows.shape[1]}"
            )
        self.seen += vectors.shape[0]
        self._keep(vectors, _priorities(vectors, self.seed))
        return self

    def _keep(self, rows: np.ndarray, prio: np.ndarray) -> None:
        if self._rows is not None:
            rows = np.concatenate([self._rows, rows])
            prio = np.concatenate([self._prio, prio])
        _, first = np.unique(prio, return_index=True)  # sorted by priority, one row per priority
        first = first[: self.k]
        self._rows, self._prio = rows[first].copy(), prio[first]

    def merge(self, other: VectorSample) -> VectorSample:
        if (self.k, self.seed) != (other.k, other.seed):
            raise ValueError("vector samples of different size or seed do not merge")
        out = VectorSample(self.k, self.seed)
        out.seen = self.seen + other.seen
        for part in (self, other):
            if part._rows is not None:
                out._keep(part._rows, part._prio)
        return out

    def array(self) -> np.ndarray:
        """The sampled vectors, in priority order (an empty (0, 0) array before any row)."""
        return self._rows if self._rows is not None else np.zeros((0, 0), dtype=np.float32)

    def __len__(self) -> int:
        return 0 if self._rows is None else self._rows.shape[0]

    @classmethod
    def from_array(
        cls, rows: np.ndarray, k: int = SAMPLE_SIZE, seed: int = 0, seen: int | None = None
    ) -> VectorSample:
        """A sample read back from disk: its priorities are recomputed from the rows' bytes."""
        sample = cls(k, seed).add(rows) if len(rows) else cls(k, seed)
        sample.seen = len(rows) if seen is None else seen
        return sample


class Profile(BaseModel):
    """One batch's statistics (a version's reference or a run's traffic); see the module docstring."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: Literal["reference", "traffic"]
    model: str | None = None
    version: str | None = None
    run_id: str | None = None
    form: Literal["cross", "bi"]
    threshold: float | None = None
    max_length: int
    n_pairs: int = 0
    histograms: dict[str, Histogram] = Field(default_factory=lambda: {s: Histogram.of(s) for s in EDGES})
    positives: int = 0
    vectors: VectorSample | None = Field(default=None, exclude=True)
    vector_seen: int = 0
    vector_k: int = SAMPLE_SIZE
    vector_seed: int = 0
    health: dict[str, float] = Field(default_factory=dict)
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def positive_rate(self) -> float:
        return self.positives / self.n_pairs if self.n_pairs and self.threshold is not None else float("nan")

    def rate(self, name: str) -> float:
        """A health count as a share of the rows that came in (`rows_in`), NaN when unknown."""
        rows = self.health.get("rows_in", 0)
        return self.health[name] / rows if rows and name in self.health else float("nan")

    def merge(self, other: Profile) -> Profile:
        """Both batches as one (the last nights as one history, chunks of a run as one run).

        Counts add; `pairs_per_s` becomes all pairs over all seconds; the newer `created` is kept.
        """
        if (self.form, self.max_length) != (other.form, other.max_length):
            raise ValueError("profiles of different model forms or max_length do not merge")
        hist = {
            k: h.merge(other.histograms[k]) if k in other.histograms else h
            for k, h in self.histograms.items()
        }
        hist |= {k: h for k, h in other.histograms.items() if k not in hist}
        health = {
            k: self.health.get(k, 0.0) + other.health.get(k, 0.0)
            for k in self.health.keys() | other.health.keys()
        }
        seconds = sum(
            p.n_pairs / p.health["pairs_per_s"] for p in (self, other) if p.health.get("pairs_per_s")
        )
        if "pairs_per_s" in health:
            health["pairs_per_s"] = (self.n_pairs + other.n_pairs) / seconds if seconds else 0.0
        if self.vectors is not None and other.vectors is not None:
            vectors = self.vectors.merge(other.vectors)
        else:
            vectors = self.vectors if self.vectors is not None else other.vectors
        return self.model_copy(
            update={
                "n_pairs": self.n_pairs + other.n_pairs,
                "histograms": hist,
                "positives": self.positives + other.positives,
                "vectors": vectors,
                "vector_seen": vectors.seen if vectors is not None else 0,
                "health": health,
                "created": max(self.created, other.created),
            }
        )

    def save(self, directory: str | Path) -> Path:
        """`<dir>/profile.json` (and `<dir>/vectors.npy` when there are vectors), each written atomically."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self.vectors is not None and len(self.vectors):
            tmp = temp_path(directory / VECTORS_FILE)
            with open(tmp, "wb") as fh:
                np.save(fh, self.vectors.array(), allow_pickle=False)
            commit(tmp, directory / VECTORS_FILE)
            self.vector_seen, self.vector_k, self.vector_seed = (
                self.vectors.seen,
                self.vectors.k,
                self.vectors.seed,
            )
        tmp = temp_path(directory / PROFILE_FILE)
        tmp.write_text(self.model_dump_json(indent=1), encoding="utf-8")
        commit(tmp, directory / PROFILE_FILE)
        return directory / PROFILE_FILE

    @classmethod
    def load(cls, directory: str | Path) -> Profile:
        """A profile saved by `save` (a folder or its `profile.json`); errors name the file."""
        path = Path(directory)
        if path.is_dir():
            path = path / PROFILE_FILE
        vectors = path.parent / VECTORS_FILE
        try:  # a damaged vector file is a damaged profile too: `history` skips it, naming it
            profile = cls.model_validate_json(path.read_text(encoding="utf-8"))
            if vectors.exists():
                rows = np.load(vectors, allow_pickle=False)
                profile.vectors = VectorSample.from_array(
                    rows, profile.vector_k, profile.vector_seed, profile.vector_seen
                )
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: not a readable monitoring profile ({exc})") from exc
        return profile


def _flags(tokenizer: Any) -> np.ndarray:
    """Per vocabulary id: True for `[UNK]` and word fragments (see the module docstring)."""
    vocab: dict[str, int] = tokenizer.get_vocab()
    flags = np.zeros(max(vocab.values(), default=0) + 1, dtype=bool)
    pieces = list(vocab)
    if any(p.startswith("##") for p in pieces):
        for piece, i in vocab.items():
            flags[i] = piece.startswith("##")
    elif sum(p.startswith("\u2581") for p in pieces) > len(pieces) // 4:
        special = set(tokenizer.all_special_tokens)
        for piece, i in vocab.items():
            flags[i] = not piece.startswith("\u2581") and piece not in special
    if tokenizer.unk_token_id is not None:
        flags[tokenizer.unk_token_id] = True
    return flags


def _text_priority(text: str, seed: int) -> int:
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8, key=seed.to_bytes(8, "little")).digest(), "little"
    )


class ProfileBuilder:
    """Builds a `Profile` chunk by chunk in fixed memory (histograms, a k-row sample, counters).

    It tokenizes the texts itself with the model's fast tokenizer (one batch call per side per chunk,
    no special tokens), so what it counts is exactly what the model's tokenizer makes of the text.
    """

    def __init__(
        self,
        tokenizer: Any,
        max_length: int,
        form: Literal["cross", "bi"],
        threshold: float | None,
        kind: Literal["reference", "traffic"],
        model: str | None = None,
        version: str | None = None,
        *,
        k: int = SAMPLE_SIZE,
        seed: int = 0,
    ) -> None:
        self.tokenizer = tokenizer
        self.profile = Profile(
            kind=kind, model=model, version=version, form=form, threshold=threshold,
            max_length=max_length, vector_k=k, vector_seed=seed,
        )  # fmt: skip
        self._rare = _flags(tokenizer)
        self._special_pair = tokenizer.num_special_tokens_to_add(pair=True)
        self._special_one = tokenizer.num_special_tokens_to_add(pair=False)
        self._vectors: VectorSample | None = None
        self._texts: dict[int, str] = {}  # bi without vectors: the k texts with the smallest priorities
        self._cutoff: int | None = None

    def _lengths_and_rare(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = self.tokenizer(
            list(texts), add_special_tokens=False, truncation=False,
            return_attention_mask=False, return_token_type_ids=False,
        )["input_ids"]  # fmt: skip
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        flat = np.minimum(flat, len(self._rare) - 1)
        ends = np.cumsum(lengths)
        running = np.concatenate([[0], np.cumsum(self._rare[flat], dtype=np.int64)])
        rare = running[ends] - running[ends - lengths]
        share = np.divide(rare, lengths, out=np.zeros(len(ids), dtype=np.float64), where=lengths > 0)
        return lengths, share

    def add(
        self,
        text_a: Sequence[str],
        text_b: Sequence[str],
        scores: np.ndarray,
        vectors: np.ndarray | None = None,
    ) -> None:
        """One chunk of scored pairs; `vectors` (bi-encoders) are any sentence vectors of the chunk."""
        scores = np.asarray(scores, dtype=np.float64).ravel()
        if not (len(text_a) == len(text_b) == len(scores)):
            raise ValueError(
                f"text_a, text_b and scores differ in length: {len(text_a)}, {len(text_b)}, {len(scores)}"
            )
        p, h = self.profile, self.profile.histograms
        la, ra = self._lengths_and_rare(text_a)
        lb, rb = self._lengths_and_rare(text_b)
        h["tokens"].add(la).add(lb)
        h["rare"].add(ra).add(rb)
        if p.form == "cross":
            cut = (la + lb + self._special_pair) > p.max_length
        else:
            cut = ((la + self._special_one) > p.max_length) | ((lb + self._special_one) > p.max_length)
        h["truncated"].add(cut.astype(np.float64))
        h["score"].add(scores)
        p.n_pairs += len(scores)
        if p.threshold is not None:
            p.positives += int((scores >= p.threshold).sum())
        if vectors is not None:
            if self._vectors is None:
                self._vectors = VectorSample(p.vector_k, p.vector_seed)
            self._vectors.add(vectors)
        elif p.form == "bi":
            self._sample_texts(text_a, text_b)

    def _sample_texts(self, text_a: Sequence[str], text_b: Sequence[str]) -> None:
        """Bottom-k over the distinct texts by a seeded hash: the texts `finish(embed=...)` embeds."""
        seed = self.profile.vector_seed
        for text in itertools.chain(text_a, text_b):
            prio = _text_priority(text, seed)
            if self._cutoff is not None and prio >= self._cutoff:
                continue
            self._texts[prio] = text
            if len(self._texts) > 2 * self.profile.vector_k:  # prune now and then, not per text
                keep = sorted(self._texts)[: self.profile.vector_k]
                self._texts = {q: self._texts[q] for q in keep}
                self._cutoff = keep[-1]

    def set_health(self, **counts: float) -> None:
        """The run's health figures (names in `HEALTH_KEYS`), set once its counts are known."""
        unknown = set(counts) - set(HEALTH_KEYS)
        if unknown:
            raise ValueError(f"unknown health figures {sorted(unknown)}; known: {', '.join(HEALTH_KEYS)}")
        self.profile.health.update({k: float(v) for k, v in counts.items()})

    def sampled_texts(self) -> list[str]:
        """The texts chosen for the vector sample (bi-encoders given no vectors), in priority order."""
        return [self._texts[q] for q in sorted(self._texts)[: self.profile.vector_k]]

    def finish(self, embed: Callable[[list[str]], np.ndarray] | None = None) -> Profile:
        """The profile; with `embed` (a bi-encoder's `embed`), the sampled texts' vectors are added."""
        if embed is not None and self._vectors is None and self._texts:
            self._vectors = VectorSample(self.profile.vector_k, self.profile.vector_seed)
            self._vectors.add(np.asarray(embed(self.sampled_texts()), dtype=np.float32))
        self.profile.vectors = self._vectors
        self.profile.vector_seen = self._vectors.seen if self._vectors is not None else 0
        return self.profile


def _tokenizer_of(predictor: Any) -> Any:
    """The tokenizer of the member that reads the texts first (a cascade's bi stage, a stack's first)."""
    if hasattr(predictor, "tokenizer"):
        return predictor.tokenizer
    return _tokenizer_of(predictor.members[0])


def _bi_member(predictor: Any) -> Any | None:
    """The model whose sentence vectors stand for meaning: a bi-encoder itself, a cascade's bi stage."""
    if getattr(predictor, "kind", None) == "bi" and hasattr(predictor, "embed"):
        return predictor
    for member in getattr(predictor, "members", []):
        if getattr(member, "kind", None) == "bi" and hasattr(member, "embed"):
            return member
    return None


def reference_profile(
    predictor_or_model_dir: Any,
    dev_pairs: Any,
    threshold: float | None = None,
    *,
    model: str | None = None,
    version: str | None = None,
    batch_size: int = 64,
    chunk_rows: int = 4096,
    k: int = SAMPLE_SIZE,
    seed: int = 0,
) -> Profile:
    """The version's reference: its own scores of its dev pairs, profiled as traffic will be.

    `predictor_or_model_dir`: a loaded predictor or anything `load_predictor` takes. `dev_pairs`: a
    pyarrow Table or polars DataFrame with `text_a` and `text_b`. `threshold`: the model's, when None.
    Bi-encoders (and a cascade's bi stage) add a fixed sample of the dev sentences' vectors.
    """
    import polars as pl

    predictor = predictor_or_model_dir
    if not hasattr(predictor, "predict"):
        from simpair.runtime.loader import load_predictor

        predictor = load_predictor(predictor_or_model_dir)
    frame = dev_pairs if isinstance(dev_pairs, pl.DataFrame) else pl.from_arrow(dev_pairs)
    missing = {"text_a", "text_b"} - set(frame.columns)
    if missing:
        raise ValueError(f"dev pairs lack column(s) {sorted(missing)}")
    if threshold is None:
        threshold = getattr(predictor, "threshold", None)
    threshold = (
        None
        if threshold is None or (isinstance(threshold, float) and math.isnan(threshold))
        else float(threshold)
    )
    bi = _bi_member(predictor)
    form: Literal["cross", "bi"] = "bi" if getattr(predictor, "kind", None) == "bi" else "cross"
    builder = ProfileBuilder(
        _tokenizer_of(predictor),
        int(predictor.max_length),
        form,
        threshold,
        "reference",
        model,
        version,
        k=k,
        seed=seed,
    )
    for start in range(0, frame.height, chunk_rows):
        part = frame.slice(start, chunk_rows)
        a, b = part["text_a"].to_list(), part["text_b"].to_list()
        scores = predictor.predict(a, b, batch_size=batch_size)["score"]
        builder.add(a, b, scores)
    embed = None
    if bi is not None:

        def embed(texts: list[str]) -> np.ndarray:
            return bi.embed(texts, batch_size=batch_size)

        if form == "cross":  # a cross-form composite with a bi member: sample texts explicitly
            a, b = frame["text_a"].to_list(), frame["text_b"].to_list()
            builder._sample_texts(a, b)
    return builder.finish(embed=embed)


def profile_summary(profile: Profile) -> dict[str, Any]:
    """A few plain figures of a profile (for logs, tags and tests)."""
    h = profile.histograms
    return json.loads(
        json.dumps(
            {
                "n_pairs": profile.n_pairs,
                "tokens_mean": h["tokens"].mean(),
                "truncated_share": float(h["truncated"].share()[-1]) if h["truncated"].total else None,
                "rare_mean": h["rare"].mean(),
                "score_mean": h["score"].mean(),
                "positive_rate": profile.positive_rate,
                "vectors": len(profile.vectors) if profile.vectors is not None else 0,
            },
            default=float,
        )
    )
