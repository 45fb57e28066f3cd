"""Out-of-core duplicate removal and leakage equal the whole-dataset, in-memory rules they replace.

The oracles below are the in-memory implementations as they were before the data went out of core
(dictionaries of sha1 keys over one frame), kept here only as the reference. A tiny `bucket_rows`
forces many on-disk buckets so the partitioned path runs on small data.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
import yaml
from ingest_helpers import TOY_CONTRACT

from simpair.catalog import LEAKAGE_COLUMNS, Catalog
from simpair.contracts import Contract
from simpair.ingest.dedupe import duplicate_rejects
from simpair.ingest.leakage import compute_leakage, update_leakage
from simpair.pairs import ordered_pair_key, pair_key

TEXTS = ["a", "b", "B", "é", "e\u0301x", "zz", "a b", "ä", "Ω", "z"]
IDS = ["1", "2", "3", "it's", 'say "x"', "back\\slash", "tab\there", "ünï", "Ω7"]


def _oracle(frame: pl.DataFrame, contract: Contract) -> list[tuple[int, int, str, str]]:
    """The pre-streaming `checks.duplicate_rows`, applied to each split in (file_index, line) order."""
    out = []
    key_of = pair_key if contract.checks.symmetric_pairs else ordered_pair_key
    for split in frame["split"].unique().to_list():
        rows = frame.filter(pl.col("split") == split).sort("file_index", "line").to_dicts()
        seen_pairs: dict[str, int] = {}
        seen_ids: dict[str, int] = {}

        def where(row: dict, first: dict) -> str:
            same = first["source_file"] == row["source_file"]
            return f"line {first['line']}" if same else f"{first['source_file']}:{first['line']}"

        for i, row in enumerate(rows):
            if contract.checks.drop_exact_duplicates:
                key = key_of(row["text_a"], row["text_b"])
                if key in seen_pairs:
                    first = rows[seen_pairs[key]]
                    how = "same text_a/text_b" if first["text_a"] == row["text_a"] else "same texts, swapped,"
                    out.append((row["file_index"], row["line"], "duplicate", f"{how} as {where(row, first)}"))
                    continue
                seen_pairs[key] = i
            if contract.checks.unique_pair_ids:
                pid = row["pair_id"]
                if pid in seen_ids:
                    detail = f"pair_id {pid!r} already on {where(row, rows[seen_ids[pid]])}"
                    out.append((row["file_index"], row["line"], "duplicate_pair_id", detail))
                    continue
                seen_ids[pid] = i
    return sorted(out)


def _contract(**checks: bool) -> Contract:
    return Contract.model_validate({**yaml.safe_load(TOY_CONTRACT), "checks": checks})


def _candidates(seed: int, n: int) -> pl.DataFrame:
    rng = random.Random(seed)
    rows = []
    for file_index in range(4):
        for line in range(2, 2 + n // 4):
            if rows and rng.random() < 0.3:  # a copy of an earlier row, maybe swapped, maybe another id
                a, b, pid = (lambda r: (r["text_a"], r["text_b"], r["pair_id"]))(rng.choice(rows))
                a, b = (b, a) if rng.random() < 0.5 else (a, b)
                pid = pid if rng.random() < 0.5 else rng.choice(IDS)
            else:
                a, b, pid = rng.choice(TEXTS), rng.choice(TEXTS), rng.choice(IDS) + str(rng.randrange(30))
            split = (
                rng.choice(["train", "test"]) if file_index == 3 else ["train", "train", "test"][file_index]
            )
            rows.append({
                "file_index": file_index, "line": line, "split": split, "pair_id": pid,
                "text_a": a, "text_b": b, "source_file": f"f{file_index}.tsv", "label": 1,
            })  # fmt: skip
    frame = pl.DataFrame(rows).with_columns(pl.col("file_index").cast(pl.Int32))
    return frame.sample(fraction=1.0, shuffle=True, seed=seed)  # parts arrive in any order


def _parts(frame: pl.DataFrame, folder: Path, size: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, start in enumerate(range(0, frame.height, size)):
        paths.append(folder / f"part-{i}.parquet")
        frame.slice(start, size).write_parquet(paths[-1])
    return paths


def _rejected(paths: list[Path]) -> list[tuple[int, int, str, str]]:
    frame = pl.read_parquet(paths)
    assert frame.schema == pl.Schema(
        {"file_index": pl.Int32, "line": pl.Int64, "reason": pl.Utf8, "detail": pl.Utf8}
    )
    return sorted(frame.rows())


@pytest.mark.parametrize("bucket_rows", [1_000_000, 20])
@pytest.mark.parametrize(
    "checks",
    [{}, {"symmetric_pairs": False}, {"unique_pair_ids": False}, {"drop_exact_duplicates": False}],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_duplicates_equal_the_in_memory_rules(
    tmp_path: Path, seed: int, checks: dict, bucket_rows: int
) -> None:
    frame = _candidates(seed, 240)
    contract = _contract(**checks)
    expected = _oracle(frame, contract)
    assert len(expected) > 20  # the data really has duplicates of every kind to find
    got = duplicate_rejects(_parts(frame, tmp_path / "parts", 70), contract, tmp_path / "work", bucket_rows)
    assert _rejected(got) == expected
    if bucket_rows == 20:  # several buckets really were used, and cleaned away
        assert not any(p.is_dir() for p in (tmp_path / "work").iterdir())


def test_a_first_copy_in_another_file_is_named_by_file(tmp_path: Path) -> None:
    rows = [  # (file_index, line, split, pair_id, a, b, source_file), all labelled 1
        (0, 2, "train", "p1", "x", "y", "a.tsv"),
        (0, 3, "test", "p1", "x", "y", "a.tsv"),  # another split: not a duplicate
        (1, 2, "train", "p9", "y", "x", "b.tsv"),  # swapped copy, first copy in a.tsv
        (1, 3, "train", "p1", "x", "z", "b.tsv"),  # pair id seen in a.tsv
        (1, 4, "train", "p'2", "q", "r", "b.tsv"),
        (1, 5, "train", "p'2", "q", "s", "b.tsv"),
    ]
    names = ["file_index", "line", "split", "pair_id", "text_a", "text_b", "source_file"]
    frame = pl.DataFrame(rows, schema=names, orient="row").with_columns(
        pl.col("file_index").cast(pl.Int32), pl.lit(1).alias("label")
    )
    got = duplicate_rejects(
        _parts(frame, tmp_path / "parts", 2), _contract(), tmp_path / "work", bucket_rows=1
    )
    assert _rejected(got) == [
        (1, 2, "duplicate", "same texts, swapped, as a.tsv:2"),
        (1, 3, "duplicate_pair_id", "pair_id 'p1' already on a.tsv:2"),
        (1, 5, "duplicate_pair_id", 'pair_id "p\'2" already on line 4'),
    ]


def test_no_candidates_gives_an_empty_reject_file(tmp_path: Path) -> None:
    got = duplicate_rejects([], _contract(), tmp_path / "work")
    assert _rejected(got) == []


# ---- leakage ----------------------------------------------------------------------------------


def _old_leakage(catalog: Catalog) -> pl.DataFrame:
    """The pre-streaming `compute_leakage`: sha1 keys of every row of every split, joined in memory."""
    train, evals = [], []
    for dataset in catalog.datasets():
        for split, role in catalog.splits(dataset).items():
            frame = catalog.read_split(dataset, split)
            keys = [pair_key(a, b) for a, b in zip(frame["text_a"], frame["text_b"], strict=True)]
            keyed = pl.DataFrame({"pair_id": frame["pair_id"], "pair_key": keys}).with_columns(
                pl.lit(dataset).alias("dataset"), pl.lit(split).alias("split")
            )
            if role in ("train", "dev"):
                train.append(keyed)
            if role != "train":
                evals.append(keyed)
    train_all = pl.concat(train).rename(
        {"dataset": "train_dataset", "split": "train_split", "pair_id": "train_pair_id"}
    )
    joined = pl.concat(evals).join(train_all, on="pair_key", how="inner")
    joined = joined.filter(
        (pl.col("dataset") != pl.col("train_dataset")) | (pl.col("split") != pl.col("train_split"))
    )
    return joined.select(LEAKAGE_COLUMNS)


def _home(tmp_path: Path, seed: int) -> Path:
    """Two datasets with train/dev/test splits drawn from a few texts, so pairs leak across them."""
    rng = random.Random(seed)
    for dataset in ("alpha", "beta"):
        folder = tmp_path / "datasets" / dataset / "v1"
        folder.mkdir(parents=True)
        (tmp_path / "datasets" / dataset / "CURRENT").write_text("v1\n")
        splits = [{"split": s, "role": s} for s in ("train", "dev", "test")]
        (folder / "manifest.json").write_text(json.dumps({"splits": splits}))
        for spec in splits:
            n = rng.randrange(20, 60)
            pl.DataFrame({
                "pair_id": [f"{spec['split']}{i}" for i in range(n)],
                "text_a": [rng.choice(TEXTS) for _ in range(n)],
                "text_b": [rng.choice(TEXTS[:4]) for _ in range(n)],
            }).write_parquet(folder / f"{spec['split']}.parquet")  # fmt: skip
    return tmp_path


@pytest.mark.parametrize("bucket_rows", [1_000_000, 4])
def test_leakage_equals_the_in_memory_join(tmp_path: Path, bucket_rows: int) -> None:
    catalog = Catalog(_home(tmp_path, seed=bucket_rows))
    got = compute_leakage(catalog, bucket_rows=bucket_rows)
    assert got.columns == LEAKAGE_COLUMNS and got.height > 50
    assert got.equals(
        got.sort(["dataset", "split", "train_dataset", "train_split", "pair_id"], maintain_order=True)
    )
    assert got.sort(LEAKAGE_COLUMNS).equals(_old_leakage(catalog).sort(LEAKAGE_COLUMNS))
    assert not [p for p in (tmp_path / "leakage").iterdir() if p.name.startswith(".tmp-")]


def test_an_unchanged_leakage_report_is_reused_with_its_counts(tmp_path: Path) -> None:
    home = _home(tmp_path, seed=3)
    first = update_leakage(home)
    again = update_leakage(home)
    assert (first.status, again.status) == ("computed", "unchanged")
    assert again.rows == first.rows == Catalog(home).leakage().height > 0
    assert again.counts == first.counts and sum(c.pairs for c in first.counts) > 0
