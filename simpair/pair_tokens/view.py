"""`PairTokens`: tokenized pairs as index views over token-cache columns, never copies of the ids.

A `PairTokens` is a list of positions into one or more cache files (`TokenFile`, memory-mapped): per
pair, which file (a small code), which row of it, and whether it is read in (b, a) order. `subset`,
`concat` and `swapped` only build new index arrays, so a training set of millions of pairs, its
symmetric copy and each DDP rank's shard cost about 20 bytes per pair in memory, and the ids are read
from the mapped files one batch at a time. Targets, labels and lengths are kept per pair in memory
(small numpy arrays), since batching and metrics read them whole.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from simpair.pair_tokens.columns import TokenFile

# batches read between two releases of the mapped pages (`TokenFile.release`): resident memory then
# holds what about this many batches touched, not the whole file
RELEASE_EVERY = 256

# the column read in place of each column when a pair is read in (b, a) order
SWAP = {
    "input_ids": "input_ids_ba",
    "input_ids_ba": "input_ids",
    "token_type_ids": "token_type_ids_ba",
    "token_type_ids_ba": "token_type_ids",
    "ids_a": "ids_b",
    "ids_b": "ids_a",
}


class PairTokens:
    """Tokenized pairs of one form with their targets: positions into cache files."""

    def __init__(
        self,
        form: str,
        files: list[TokenFile],
        names: list[tuple[str, str]],
        source: np.ndarray,
        rows: np.ndarray,
        swap: np.ndarray,
        targets: np.ndarray,
        labels: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        self.form = form
        self.files = files
        self.names = names  # (dataset, split) of each file
        self.source = source  # uint16: index into files
        self.rows = rows  # int64: row in that file
        self.swap = swap  # bool: read in (b, a) order
        self.targets = targets  # float32
        self._labels = labels  # int8: 0/1 where known, -1 otherwise
        self.lengths = lengths  # int32: what batching groups and sorts by
        self._reads = 0

    @classmethod
    def from_file(cls, file: TokenFile, task: str, dataset: str, split: str) -> PairTokens:
        """Every row of one cache file. Target: the label for paraphrase (score if unlabelled), else
        the score."""
        n = len(file)
        label = None if np.isnan(file.label).any() else file.label
        score = None if np.isnan(file.score).any() else file.score
        if label is None and score is None:
            raise ValueError(f"{dataset}/{split}: rows have neither a label nor a score in every row")
        if task == "paraphrase":
            targets = label if label is not None else score
        else:
            targets = score if score is not None else label
        labels = label.astype(np.int8) if label is not None else np.full(n, -1, dtype=np.int8)
        return cls(
            file.form,
            [file],
            [(dataset, split)],
            np.zeros(n, dtype=np.uint16),
            np.arange(n, dtype=np.int64),
            np.zeros(n, dtype=bool),
            np.asarray(targets, dtype=np.float32),
            labels,
            np.asarray(file.lengths, dtype=np.int32),
        )

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def labels(self) -> np.ndarray:
        """int64 0/1 where known, -1 otherwise (for stratification and metrics)."""
        return self._labels.astype(np.int64)

    def subset(self, idx: np.ndarray | Sequence[int]) -> PairTokens:
        idx = np.asarray(idx, dtype=np.int64)
        return PairTokens(
            self.form,
            self.files,
            self.names,
            self.source[idx],
            self.rows[idx],
            self.swap[idx],
            self.targets[idx],
            self._labels[idx],
            self.lengths[idx],
        )

    def swapped(self) -> PairTokens:
        """The same pairs in (b, a) order (symmetric training); lengths stay those of (a, b)."""
        return PairTokens(
            self.form,
            self.files,
            self.names,
            self.source,
            self.rows,
            ~self.swap,
            self.targets,
            self._labels,
            self.lengths,
        )

    @staticmethod
    def concat(parts: list[PairTokens]) -> PairTokens:
        """The parts one after the other; files shared between parts are kept once."""
        files: list[TokenFile] = []
        names: list[tuple[str, str]] = []
        remapped = []
        for part in parts:
            codes = []
            for file, name in zip(part.files, part.names, strict=True):
                pos = next((i for i, f in enumerate(files) if f is file and names[i] == name), None)
                if pos is None:
                    files.append(file)
                    names.append(name)
                    pos = len(files) - 1
                codes.append(pos)
            remapped.append(np.asarray(codes, dtype=np.uint16)[part.source])
        return PairTokens(
            parts[0].form,
            files,
            names,
            np.concatenate(remapped),
            np.concatenate([p.rows for p in parts]),
            np.concatenate([p.swap for p in parts]),
            np.concatenate([p.targets for p in parts]),
            np.concatenate([p._labels for p in parts]),
            np.concatenate([p.lengths for p in parts]),
        )

    # --- names per pair -------------------------------------------------------------------------

    def dataset_codes(self) -> np.ndarray:
        """Per pair, the rank of its dataset's name among the names present (sorts like the names)."""
        ranks = {d: i for i, d in enumerate(sorted({d for d, _ in self.names}))}
        return np.asarray([ranks[d] for d, _ in self.names], dtype=np.int32)[self.source]

    @property
    def dataset(self) -> list[str]:
        """Each pair's dataset name (a list as long as the pairs: for small sets and tests)."""
        return [self.names[s][0] for s in self.source.tolist()]

    @property
    def split(self) -> list[str]:
        return [self.names[s][1] for s in self.source.tolist()]

    def count_by_dataset(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for code, n in zip(*np.unique(self.source, return_counts=True), strict=True):
            counts[self.names[int(code)][0]] += int(n)
        return dict(counts)

    def split_labels(self) -> list[str]:
        """`dataset/split` of every file some pair reads, sorted."""
        return sorted({"/".join(self.names[int(s)]) for s in np.unique(self.source)})

    def pair_id_array(self) -> pa.LargeStringArray:
        """Each pair's id, in order, as an Arrow array (one take per file, no Python strings)."""
        if len(self) == 0:
            return pa.array([], type=pa.large_string())
        order = np.argsort(self.source, kind="stable")
        sorted_src = self.source[order]
        chunks = []
        for code in np.unique(sorted_src):
            lo, hi = np.searchsorted(sorted_src, [code, code + 1])
            chunks.append(self.files[int(code)].pair_id_array().take(pa.array(self.rows[order[lo:hi]])))
        combined = pa.concat_arrays(chunks)
        if len(chunks) == 1:  # one file: the stable sort left the order as it was
            return combined
        return combined.take(pa.array(np.argsort(order, kind="stable")))

    @property
    def pair_ids(self) -> list[str]:
        """Each pair's id as a Python list (small sets; `pair_id_array` for large ones)."""
        return self.pair_id_array().to_pylist()

    def pair_lines(self) -> pa.LargeStringArray:
        """`dataset<TAB>split<TAB>pair_id` per pair (the model's record of what it trained on)."""
        prefixes = pa.array([f"{d}\t{s}\t" for d, s in self.names], type=pa.large_string())
        prefix = pa.DictionaryArray.from_arrays(pa.array(self.source.astype(np.int32)), prefixes)
        empty = pa.scalar("", type=pa.large_string())
        return pc.binary_join_element_wise(prefix.dictionary_decode(), self.pair_id_array(), empty)

    def digest(self, chunk: int = 65536) -> str:
        """sha1 of the `pair_lines`, each ended by a newline (a fingerprint of exactly these pairs)."""
        digest = hashlib.sha1()
        for start in range(0, len(self), chunk):
            lines = self.subset(np.arange(start, min(start + chunk, len(self)))).pair_lines()
            digest.update(("\n".join(lines.to_pylist()) + "\n").encode())
        return digest.hexdigest()

    # --- token ids --------------------------------------------------------------------------------

    def _groups(self, idx: np.ndarray) -> Iterator[tuple[np.ndarray, int, bool]]:
        """(positions within idx, file code, swapped) for each file/order the pairs at idx read."""
        src, swap = self.source[idx], self.swap[idx]
        if len(idx) and (src == src[0]).all() and (swap == swap[0]).all():
            yield np.arange(len(idx)), int(src[0]), bool(swap[0])
            return
        key = src.astype(np.int64) * 2 + swap
        for k in np.unique(key):
            yield np.flatnonzero(key == k), int(k // 2), bool(k % 2)

    def padded(
        self, name: str, idx: np.ndarray, pad_id: int, types: str | None = None
    ) -> dict[str, np.ndarray]:
        """The pairs at idx as right-padded int64 arrays, like `simpair.models.batching.pad_batch`:
        `input_ids`, `attention_mask` and, with `types`, `token_type_ids` (that column's rows)."""
        self._reads += 1
        if self._reads % RELEASE_EVERY == 0:
            for file in self.files:
                file.release()
        idx = np.asarray(idx, dtype=np.int64)
        n = len(idx)
        groups = [
            (at, self.files[code], SWAP if swapped else {}, self.rows[idx[at]])
            for at, code, swapped in self._groups(idx)
        ]
        lens = np.zeros(n, dtype=np.int64)
        for at, file, swap, rows in groups:
            offsets = file.tokens[swap.get(name, name)].offsets
            lens[at] = offsets[rows + 1] - offsets[rows]
        width = int(lens.max()) if n else 1
        mask = np.arange(width) < lens[:, None]
        out = {"input_ids": np.full((n, width), pad_id, dtype=np.int64)}
        out["attention_mask"] = mask.astype(np.int64)
        if types is not None:
            out["token_type_ids"] = np.zeros((n, width), dtype=np.int64)
        for at, file, swap, rows in groups:
            whole = len(groups) == 1
            cells = mask if whole else mask[at]
            for key, column in (("input_ids", name), ("token_type_ids", types)):
                if column is None:
                    continue
                col = file.tokens[swap.get(column, column)]
                # row r's tokens sit at values[offsets[r] + j] for j < its length: one gather for all
                values = col.values[(col.offsets[rows][:, None] + np.arange(width))[cells]]
                if whole:
                    out[key][cells] = values
                else:
                    block = out[key][at]
                    block[cells] = values
                    out[key][at] = block
        return out

    def iter_rows(self, name: str, chunk: int = 4096) -> Iterator[np.ndarray]:
        """Each pair's ids of one column, in order, read a chunk of pairs at a time."""
        for start in range(0, len(self), chunk):
            idx = np.arange(start, min(start + chunk, len(self)))
            batch = self.padded(name, idx, 0)
            for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True):
                yield ids[: int(mask.sum())]


class TokenInput:
    """One model input read from `PairTokens` a batch at a time (what `forward_sorted` consumes)."""

    def __init__(self, pairs: PairTokens, name: str, types: str | None = None) -> None:
        self.pairs, self.name, self.types = pairs, name, types

    def __len__(self) -> int:
        return len(self.pairs)

    def pad(self, idx: np.ndarray, pad_id: int) -> dict[str, np.ndarray]:
        return self.pairs.padded(self.name, idx, pad_id, self.types)
