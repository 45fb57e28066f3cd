"""A token-cache file as flat, memory-mapped numpy columns: resident memory flat at any size.

The Parquet cache (`simpair.tokens`) is compact on disk but must be decoded to be read, and decoded
into Python lists it costs about 1.45 KiB per pair. Here each list column becomes two raw files, its
values (the cache's own dtype: uint16, int32 or int8) and int64 row offsets, written once beside the
cache file by streaming it row group by row group, column by column, and then memory-mapped: the
operating system pages in what a batch touches and can drop it again, so a process holds only
what it reads, whatever the split's size. Pair ids are kept the same way (UTF-8 bytes + offsets) and
read back as an Arrow string array without copying.

Layout: `<cache file>.columns/` holding `meta.json` and `<name>.values` / `<name>.offsets` per list
column, `label`, `score` (float32, NaN where null) and `lengths` (int32: the joint length for the
cross form, the longer text for bi). `meta.json` records the cache file's size and mtime, so a
rewritten cache file is never read through a stale copy. Built under a file lock and renamed in
whole (`simpair.atomic`), so DDP ranks and parallel runs build it once.
"""

from __future__ import annotations

import json
import mmap
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from filelock import FileLock

from simpair.atomic import atomic_path

COLUMNS_FORMAT = 1
TOKEN_COLUMNS = {
    "cross": ("input_ids", "token_type_ids", "input_ids_ba", "token_type_ids_ba"),
    "bi": ("ids_a", "ids_b"),
}


@dataclass(frozen=True)
class Ragged:
    """Rows of varying length: row i is `values[offsets[i]:offsets[i + 1]]`."""

    values: np.ndarray
    offsets: np.ndarray  # int64, one more than the rows

    def __len__(self) -> int:
        return len(self.offsets) - 1


@dataclass(frozen=True)
class TokenFile:
    """One cache file's columns, memory-mapped (or, for tables built in memory, plain arrays)."""

    form: str
    tokens: dict[str, Ragged]
    pair_ids: Ragged  # UTF-8 bytes
    label: np.ndarray  # float32, NaN where the cache has no label
    score: np.ndarray  # float32, NaN where the cache has no score
    lengths: np.ndarray  # int32

    def __len__(self) -> int:
        return len(self.lengths)

    def release(self) -> None:
        """Let go of the mapped pages read so far (they stay in the page cache; reading them again is
        a minor fault). Keeps resident memory flat over an epoch that touches every page."""
        arrays = [self.label, self.score, self.lengths, self.pair_ids.values, self.pair_ids.offsets]
        arrays += [a for col in self.tokens.values() for a in (col.values, col.offsets)]
        for array in arrays:
            mapping = getattr(array.base, "_mmap", None)
            if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
                mapping.madvise(mmap.MADV_DONTNEED)

    def pair_id_array(self) -> pa.LargeStringArray:
        """Every pair id as an Arrow string array over the mapped bytes (no copy)."""
        return pa.LargeStringArray.from_buffers(
            len(self), pa.py_buffer(self.pair_ids.offsets), pa.py_buffer(self.pair_ids.values)
        )


def form_of(names: list[str]) -> str:
    return "cross" if "input_ids" in names else "bi"


def _list_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(flat values, row lengths) of a list array, honouring slices; nulls read as empty rows."""
    lens = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return pc.list_flatten(arr).to_numpy(zero_copy_only=False), lens


def _string_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    arr = arr.cast(pa.large_string())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.zeros(0)
    return data[offsets[0] : offsets[-1]].astype(np.uint8, copy=False), np.diff(offsets)


def _scalar(arr: pa.Array) -> np.ndarray:
    return pc.fill_null(arr.cast(pa.float32()), float("nan")).to_numpy(zero_copy_only=False)


def _source_stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + ".columns")


def _write_sidecar(path: Path, folder: Path) -> dict[str, Any]:
    """Stream the cache file into raw column files in `folder`; returns the metadata."""
    pf = pq.ParquetFile(path)
    names = pf.schema_arrow.names
    form = form_of(names)
    ragged = [*TOKEN_COLUMNS[form], "pair_id"]
    dtypes: dict[str, str] = {}
    totals = dict.fromkeys(ragged, 0)
    with ExitStack() as stack:

        def create(name: str) -> BinaryIO:
            return stack.enter_context(open(folder / name, "wb"))

        handles = {n: (create(f"{n}.values"), create(f"{n}.offsets")) for n in ragged}
        scalars = {n: create(n) for n in ("label", "score", "lengths")}
        for _, offs in handles.values():
            offs.write(np.zeros(1, dtype=np.int64).tobytes())
        for g in range(pf.num_row_groups):
            for name in ragged:
                col = pf.read_row_group(g, columns=[name]).column(0).combine_chunks()
                values, lens = _string_parts(col) if name == "pair_id" else _list_parts(col)
                dtypes.setdefault(name, values.dtype.str)
                vals, offs = handles[name]
                vals.write(np.ascontiguousarray(values, dtype=np.dtype(dtypes[name])).tobytes())
                offs.write((totals[name] + np.cumsum(lens)).astype(np.int64).tobytes())
                totals[name] += int(lens.sum())
            group = pf.read_row_group(g, columns=["label", "score", *_length_columns(form)])
            scalars["label"].write(_scalar(group.column("label")).tobytes())
            scalars["score"].write(_scalar(group.column("score")).tobytes())
            lengths = np.max([group.column(c).to_numpy() for c in _length_columns(form)], axis=0)
            scalars["lengths"].write(lengths.astype(np.int32).tobytes())
    for name in ragged:  # a file with no row group still has a schema: take the dtype from it
        if name not in dtypes:
            kind = pf.schema_arrow.field(name).type
            dtypes[name] = "|u1" if name == "pair_id" else np.dtype(kind.value_type.to_pandas_dtype()).str
    return {"format": COLUMNS_FORMAT, "form": form, "rows": pf.metadata.num_rows, "dtypes": dtypes}


def _length_columns(form: str) -> list[str]:
    return ["length"] if form == "cross" else ["length_a", "length_b"]


def _map(path: Path, dtype: str, count: int | None = None) -> np.ndarray:
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    mapped = np.memmap(path, dtype=np.dtype(dtype), mode="r", shape=(count,) if count is not None else None)
    return mapped.view(np.ndarray)  # a plain array over the mapping: indexing skips memmap's overhead


def _open_sidecar(folder: Path, meta: dict[str, Any]) -> TokenFile:
    rows, form, dtypes = meta["rows"], meta["form"], meta["dtypes"]

    def ragged(name: str) -> Ragged:
        offsets = _map(folder / f"{name}.offsets", "<i8", rows + 1)
        return Ragged(_map(folder / f"{name}.values", dtypes[name]), offsets)

    return TokenFile(
        form=form,
        tokens={n: ragged(n) for n in TOKEN_COLUMNS[form]},
        pair_ids=ragged("pair_id"),
        label=_map(folder / "label", "<f4", rows),
        score=_map(folder / "score", "<f4", rows),
        lengths=_map(folder / "lengths", "<i4", rows),
    )


def _read_meta(folder: Path, stamp: dict[str, int]) -> dict[str, Any] | None:
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    fresh = meta.get("format") == COLUMNS_FORMAT and meta.get("source") == stamp
    return meta if fresh else None


def open_token_file(path: str | Path) -> TokenFile:
    """The cache file's columns, memory-mapped; the sidecar is built first if missing or stale."""
    path = Path(path)
    folder = sidecar_of(path)
    stamp = _source_stamp(path)
    meta = _read_meta(folder, stamp)
    if meta is None:
        with FileLock(str(folder) + ".lock"):
            meta = _read_meta(folder, stamp)
            if meta is None:
                with atomic_path(folder, directory=True) as tmp:
                    meta = {**_write_sidecar(path, tmp), "source": stamp}
                    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return _open_sidecar(folder, meta)


def token_file_from_table(table: pa.Table) -> TokenFile:
    """The same columns built in memory from a cache table (small tables, tests, filtered frames)."""
    form = form_of(table.column_names)

    def ragged(name: str) -> Ragged:
        col = table.column(name).combine_chunks()
        values, lens = _string_parts(col) if name == "pair_id" else _list_parts(col)
        return Ragged(np.asarray(values), np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))

    lengths = np.max([table.column(c).to_numpy() for c in _length_columns(form)], axis=0)
    return TokenFile(
        form=form,
        tokens={n: ragged(n) for n in TOKEN_COLUMNS[form]},
        pair_ids=ragged("pair_id"),
        label=_scalar(table.column("label").combine_chunks()),
        score=_scalar(table.column("score").combine_chunks()),
        lengths=lengths.astype(np.int32),
    )
