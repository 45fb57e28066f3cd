"""Sentence vectors kept for a whole scoring run (or across nights): encode each distinct sentence once.

Bulk batches repeat sentences across chunks and files (Zipf-like: a few sentences in thousands of
pairs). Deduping inside one chunk still re-encodes, in every chunk, the sentences it shares with
the others; the encoder is ~all of the cost, the cosine is free. So vectors are looked up by
(model identity, blake2b of the text) before the forward pass, and only distinct misses are encoded.

Why it is built this way:

- **Keyed by the model's identity**: name, version, a hash of the weight files' bytes, precision,
  forward pass (torch, ONNX Runtime, bf16) and the runtime's versions and graph-building code. Each
  identity gets its own SQLite file, so another model (or the same one in bf16, or after a runtime
  upgrade) never reads these vectors, even in a folder kept across nights.
- **SQLite, float32 blobs, write-through**: every encoded vector is committed in one transaction per
  lookup before its scores are written. A killed process leaves committed rows intact and an
  uncommitted transaction invisible (WAL), so a half-written batch is never read back; blobs of the
  wrong length are treated as misses. A resumed run reuses what the killed one stored.
- **Bounded memory**: an LRU of vectors capped in bytes sits in front of the file; what it evicts is
  already on disk and is read back on the next hit (a disk hit).
- **One store per (folder, identity) per process**: chunks in threads of one process share its memory;
  worker processes share the file (SQLite's locking serialises their writes).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from simpair.defaults import DEFAULT_EMBEDDING_MEMORY_MB as DEFAULT_MEMORY_MB
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.weights_digest import weights_digest

_SQL_VARS = 500  # keys per `IN (...)` query (SQLite's host-parameter limit is 999 on old builds)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB NOT NULL) WITHOUT ROWID;
"""


@dataclass
class StoreCounts:
    """What the store did, counted per distinct sentence of a lookup (a chunk, a member's chunk)."""

    encoded: int = 0
    memory_hits: int = 0
    disk_hits: int = 0

    def add(self, other: StoreCounts) -> None:
        self.encoded += other.encoded
        self.memory_hits += other.memory_hits
        self.disk_hits += other.disk_hits


def text_key(text: str) -> bytes:
    """16-byte blake2b of the text: fixed-size keys whatever the sentence length."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def model_identity(model: ModelRef, precision: str, forward: str) -> str:
    """Everything a vector depends on: the model, its weights, the precision, the forward pass and the
    runtime under it (`graph_cache.runtime_digest`: another int8 recipe or runtime version moves vectors)."""
    from simpair.runtime.graph_cache import cache_root, runtime_digest

    digest = weights_digest(model.local_dir, cache_root(model.local_dir))  # memoised: hashed once a host
    return "|".join((model.name, model.version, digest, precision, forward, runtime_digest()))


class EmbeddingStore:
    """Vectors of one model identity: an LRU in memory (bounded in bytes) over a SQLite file."""

    def __init__(self, folder: str | Path, identity: str, memory_mb: float = DEFAULT_MEMORY_MB) -> None:
        self.folder = Path(folder)
        self.identity = identity
        self.memory_bytes = int(memory_mb * 2**20)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", identity.split("|")[0])[:40]
        self.path = self.folder / f"{slug}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.sqlite"
        self._memory: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.dim: int | None = None
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('identity', ?)", (identity,))
            meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
        if meta["identity"] != identity:  # a file-name hash collision: refuse rather than mix models
            raise RuntimeError(f"{self.path} holds vectors of {meta['identity']!r}, not {identity!r}")
        self.dim = int(meta["dim"]) if "dim" in meta else None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A short-lived connection per call: safe across threads, forks and a folder removed between runs."""
        with closing(sqlite3.connect(self.path, timeout=60, isolation_level=None)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process loses nothing
            conn.execute("PRAGMA busy_timeout=60000")
            yield conn

    def lookup(
        self, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray]
    ) -> tuple[np.ndarray, StoreCounts]:
        """(len(texts), dim) float32 vectors in input order; `encode` is called once, on distinct misses."""
        index: dict[str, int] = {}
        inverse = np.fromiter(
            (index.setdefault(t, len(index)) for t in texts), dtype=np.int64, count=len(texts)
        )
        distinct = list(index)
        keys = [text_key(t) for t in distinct]
        counts = StoreCounts()
        found: dict[int, np.ndarray] = {}
        with self._lock:
            for i, key in enumerate(keys):
                vec = self._memory.get(key)
                if vec is not None:
                    self._memory.move_to_end(key)
                    found[i] = vec
        counts.memory_hits = len(found)
        if len(found) < len(keys):
            disk = self._read([k for i, k in enumerate(keys) if i not in found])
            for i, key in enumerate(keys):
                if i not in found and key in disk:
                    found[i] = disk[key]
            counts.disk_hits = len(found) - counts.memory_hits
            self._remember(disk)
        missing = [i for i in range(len(keys)) if i not in found]
        if missing:
            fresh = np.ascontiguousarray(encode([distinct[i] for i in missing]), dtype=np.float32)
            self._write({keys[i]: fresh[j] for j, i in enumerate(missing)}, fresh.shape[1])
            self._remember({keys[i]: fresh[j].copy() for j, i in enumerate(missing)})  # not views of `fresh`
            found.update({i: fresh[j] for j, i in enumerate(missing)})
        counts.encoded = len(missing)
        if not distinct:
            return np.zeros((0, self.dim or 0), dtype=np.float32), counts
        table = np.stack([found[i] for i in range(len(distinct))])
        return table[inverse], counts

    def _read(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        with self._connect() as conn:
            if self.dim is None:  # another worker process may have stored vectors since we opened
                row = conn.execute("SELECT value FROM meta WHERE name = 'dim'").fetchone()
                if row is None:
                    return out
                self.dim = int(row[0])
            width = 4 * self.dim
            for start in range(0, len(keys), _SQL_VARS):
                part = keys[start : start + _SQL_VARS]
                rows = conn.execute(
                    f"SELECT key, vec FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                # a blob of the wrong length is not a vector of this model: treat it as a miss
                out.update({k: np.frombuffer(v, dtype=np.float32) for k, v in rows if len(v) == width})
        return out

    def _write(self, vectors: dict[bytes, np.ndarray], dim: int) -> None:
        """One transaction: all of these vectors are on disk, or none (a kill mid-way leaves none)."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                stored = conn.execute("SELECT value FROM meta WHERE name = 'dim'").fetchone()
                if stored is not None and int(stored[0]) != dim:
                    raise RuntimeError(f"{self.path} holds {stored[0]}-dim vectors, the model gives {dim}")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('dim', ?)", (str(dim),))
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                    ((k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in vectors.items()),
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        self.dim = dim

    def _remember(self, vectors: dict[bytes, np.ndarray]) -> None:
        with self._lock:
            for key, vec in vectors.items():
                if key in self._memory:
                    self._memory.move_to_end(key)
                    continue
                self._memory[key] = vec
                self._bytes += vec.nbytes
            while self._bytes > self.memory_bytes and self._memory:
                _, old = self._memory.popitem(last=False)  # already on disk: dropping it is safe
                self._bytes -= old.nbytes

    @property
    def memory_entries(self) -> int:
        return len(self._memory)


def store_folder(out: str | Path, cache: str | Path | None) -> Path:
    """Where a run's store lives: the folder kept across nights, else `<out>/_ledger/embeddings/`."""
    return Path(cache).expanduser().resolve() if cache else Path(out) / "_ledger" / "embeddings"


_OPEN: dict[tuple[str, str], EmbeddingStore] = {}
_OPEN_LOCK = threading.Lock()


def open_store(folder: str | Path, identity: str, memory_mb: float = DEFAULT_MEMORY_MB) -> EmbeddingStore:
    """The process's store for this folder and model identity (its memory outlives one chunk).

    Reopened when its file is gone: a long-lived worker process outlives the run whose store the
    driver removed at the end, and the next run starts a fresh file.
    """
    key = (str(Path(folder).resolve()), identity)
    with _OPEN_LOCK:
        store = _OPEN.get(key)
        if store is None or store.memory_bytes != int(memory_mb * 2**20) or not store.path.exists():
            store = _OPEN[key] = EmbeddingStore(folder, identity, memory_mb)
        return store


def close_stores(folder: str | Path) -> None:
    """Forget this process's stores in `folder` (their memory), e.g. when a run ends."""
    root = str(Path(folder).resolve())
    with _OPEN_LOCK:
        for key in [k for k in _OPEN if k[0] == root]:
            del _OPEN[key]


def release_store(folder: str | Path, keep: bool) -> None:
    """After a finished run: drop this process's store memory, and the run's own store from disk.

    Only a finished run removes it: a killed run leaves it for the resumed run to reuse. A folder
    given as a cache (`--embedding-cache`) is kept for the next run of the same model identity.
    """
    close_stores(folder)
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)


class StoreReport(Protocol):
    """The store fields a run summary carries (scoring, mining and encoding summaries all do)."""

    embedding_store: str | None
    embedding_store_kept: bool
    sentences_encoded: int
    embedding_memory_hits: int
    embedding_disk_hits: int


def store_line(summary: StoreReport) -> str | None:
    """One line on what a run's store did; None when the run used no store."""
    if summary.embedding_store is None:
        return None
    where = "kept for later runs" if summary.embedding_store_kept else "removed at the end of the run"
    memory, disk = summary.embedding_memory_hits, summary.embedding_disk_hits
    return (
        f"{summary.sentences_encoded} distinct sentences encoded, {memory + disk} cache hits "
        f"({memory} memory, {disk} disk); store {summary.embedding_store} ({where})"
    )
