"""STS-B-shaped raw files of any size, for `benchmarks/scale.py` (how cost grows with rows).

Real STS-B training sentences, recombined into pairs that never repeat (unless a malformed line
repeats one on purpose), in the original layout: tab-separated, no header, quotes are text, 7 fields
(genre, file, year, id, score, sentence1, sentence2) or 9 where the sentence's source line had the two
licence columns. Ids are unique over the whole dataset; scores lie in 0-5 with STS-B's mixed
precision. About 0.5% of lines are malformed in the ways real files are: a wrong field count, a bad
score, an empty text, a duplicate of an earlier pair, the same pair swapped, a control character,
mojibake. Rows are split 80/10/10 into train/dev/test files, with a data contract beside them.

Deterministic (one seed) and written in chunks of rows, so memory stays flat at any size; the
sentences are read from the STS-B file at run time, so no data lives in the repository.

    python benchmarks/scale_data.py --rows 1M --out /tmp/scale/1M
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml

REPO = Path(__file__).resolve().parents[1]
STSB_TRAIN = REPO.parent / "shared" / "data" / "stsb" / "sts-train.csv"
STSB_CONTRACT = REPO / "data_contracts" / "stsb.yaml"
DATASET = "synth"
SPLITS = (("train", 0.8), ("dev", 0.1), ("test", 0.1))
MALFORMED_SHARE = 0.005
KINDS = (
    "field_count",
    "bad_score",
    "empty_text",
    "duplicate",
    "swapped_duplicate",
    "control_char",
    "mojibake",
)
CHUNK_ROWS = 200_000
_SCORE_FORMATS = ("{:.3f}", "{:g}", "{:.6f}")
_BAD_SCORES = ("n/a", "7.5", "-1", "", "3,5")
_SUFFIX = {"k": 1_000, "m": 1_000_000}


def parse_rows(text: str) -> int:
    """'100k', '1M', '4m', '20000' -> rows."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", text.strip())
    if not m:
        raise ValueError(f"not a row count: {text!r} (e.g. 100k, 1M, 20000)")
    return int(float(m.group(1)) * _SUFFIX.get(m.group(2).lower(), 1))


def _normal(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def sentence_pool(path: Path = STSB_TRAIN) -> pl.DataFrame:
    """Unique clean sentences of STS-B train with their source line's genre, file, year and extras.

    Clean (no control character, no mojibake, normalised whitespace) and unique after normalisation,
    so two recombined pairs can only collide when the generator means them to.
    """
    rows: dict[str, tuple[str, str, str, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) not in (7, 9):
            continue
        extras = "\t" + "\t".join(fields[7:]) if len(fields) == 9 else ""
        for text in fields[5:7]:
            clean = _normal(text)
            bad = any(unicodedata.category(c) == "Cc" for c in text) or "\u201a\u00c4" in text
            if clean and not bad and clean not in rows:
                rows[clean] = (fields[0], fields[1], fields[2], extras)
    texts = sorted(rows)  # fixed order: the output depends on the file, not on dict history
    meta = [rows[t] for t in texts]
    return pl.DataFrame(
        {
            "text": texts,
            "genre": [m[0] for m in meta],
            "file": [m[1] for m in meta],
            "year": [m[2] for m in meta],
            "extras": [m[3] for m in meta],
        }
    )


def _multiplier(total: int) -> int:
    """A multiplier coprime to `total`: row r -> pair (r * m + 7) % total is a permutation."""
    m = 1_000_003
    while math.gcd(m, total) != 1:
        m += 2
    return m


def pair_lines(pool: pl.DataFrame, order: np.ndarray, rows: np.ndarray, total: int) -> list[str]:
    """The well-formed lines of global rows `rows` (a pair never repeats over `total` rows)."""
    size = pool.height
    p = (rows * _multiplier(total) + 7) % total  # which pair: rows appear in a scrambled order
    first = p % size
    offset = p // size + 1  # < size / 2, so (a, b) and (b, a) never both occur
    a = order[first]
    b = order[(first + offset) % size]
    mix = (p * 2654435761) >> 7
    score_idx = (mix % 26) * len(_SCORE_FORMATS) + (mix >> 8) % len(_SCORE_FORMATS)
    scores = pl.Series([f.format(i / 5) for i in range(26) for f in _SCORE_FORMATS])
    src = pool[a]
    frame = pl.DataFrame(
        {
            "genre": src["genre"],
            "file": src["file"],
            "year": src["year"],
            "id": pl.Series(rows).cast(pl.String).str.zfill(8),
            "score": scores.gather(score_idx),
            "a": src["text"],
            "b": pool["text"].gather(b),
            "extras": src["extras"],
        }
    )
    line = pl.concat_str(pl.exclude("extras"), separator="\t") + pl.col("extras")
    return frame.select(line.alias("line"))["line"].to_list()


def _break(lines: list[str], i: int, kind: str, rng: np.random.Generator) -> str:
    """Line i made malformed in one of the ways `KINDS` names."""
    fields = lines[i].split("\t")
    if kind in ("duplicate", "swapped_duplicate"):
        if i == 0:
            kind = "bad_score"
        else:
            earlier = lines[i - int(rng.integers(1, min(i, 100_000) + 1))].split("\t")
            earlier[3] = fields[3]  # its own id: only the pair repeats
            if kind == "swapped_duplicate" and len(earlier) >= 7:
                earlier[5], earlier[6] = earlier[6], earlier[5]
            return "\t".join(earlier)
    if kind == "field_count":
        return "\t".join(fields[:6] if rng.random() < 0.5 else [*fields[:7], "extra"])
    if kind == "bad_score":
        fields[4] = _BAD_SCORES[int(rng.integers(len(_BAD_SCORES)))]
    elif kind == "empty_text":
        fields[5 + int(rng.integers(2))] = "" if rng.random() < 0.5 else "   "
    elif kind == "control_char":
        text = fields[5]
        at = int(rng.integers(len(text) + 1))
        fields[5] = text[:at] + ("\x12" if rng.random() < 0.5 else "\x07") + text[at:]
    elif kind == "mojibake":
        text = fields[6]
        fields[6] = text.replace("'", "\u201a\u00c4\u00f4") if "'" in text else text + " caf\u00c3\u00a9"
    return "\t".join(fields)


def write_split(
    path: Path, start: int, stop: int, total: int, pool: pl.DataFrame, order: np.ndarray, seed: int
) -> dict[str, Any]:
    """Rows [start, stop) of the dataset as one file, chunk by chunk."""
    kinds = dict.fromkeys(KINDS, 0)
    written = 0
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for chunk_start in range(start, stop, CHUNK_ROWS):
            rows = np.arange(chunk_start, min(chunk_start + CHUNK_ROWS, stop), dtype=np.int64)
            lines = pair_lines(pool, order, rows, total)
            rng = np.random.default_rng([seed, chunk_start])
            for i in np.flatnonzero(rng.random(len(lines)) < MALFORMED_SHARE):
                kind = KINDS[int(rng.integers(len(KINDS)))]
                lines[i] = _break(lines, int(i), kind, rng)
                kinds[kind] += 1
            out.write("\n".join(lines) + "\n")
            written += len(lines)
    return {"file": path.name, "lines": written, "bytes": path.stat().st_size, "malformed": kinds}


def write_contract(folder: Path, files: dict[str, str]) -> Path:
    """STS-B's contract with this dataset's name and files (comments are not kept)."""
    contract = yaml.safe_load(STSB_CONTRACT.read_text(encoding="utf-8"))
    contract["dataset"] = DATASET
    contract["description"] = (
        "STS-B sentences recombined into synthetic pairs, with malformed lines (benchmarks)."
    )
    contract["files"] = [{"split": s, "role": s, "pattern": f"{DATASET}/{files[s]}"} for s, _ in SPLITS]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{DATASET}.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def generate(total: int, out: Path, seed: int = 30) -> dict[str, Any]:
    """sources/synth/{train,dev,test}.tsv, contracts/synth.yaml and manifest.json under `out`."""
    began = time.perf_counter()
    pool = sentence_pool()
    if total >= pool.height * (pool.height // 2 - 1):
        raise ValueError(f"{total:,} rows exceed the {pool.height:,}-sentence pool's unique pairs")
    order = np.random.default_rng(seed).permutation(pool.height)
    folder = out / "sources" / DATASET
    folder.mkdir(parents=True, exist_ok=True)
    files, start = {}, 0
    splits = []
    for i, (split, share) in enumerate(SPLITS):
        stop = total if i == len(SPLITS) - 1 else start + round(total * share)
        files[split] = f"{DATASET}-{split}.tsv"
        info = write_split(folder / files[split], start, stop, total, pool, order, seed)
        splits.append({"split": split, **info})
        start = stop
    manifest = {
        "dataset": DATASET,
        "rows": total,
        "seed": seed,
        "sentences": pool.height,
        "raw_lines": sum(s["lines"] for s in splits),
        "raw_bytes": sum(s["bytes"] for s in splits),
        "malformed": {k: sum(s["malformed"][k] for s in splits) for k in KINDS},
        "splits": splits,
        "contract": str(write_contract(out / "contracts", files)),
        "sources": str(out / "sources"),
        "seconds": round(time.perf_counter() - began, 2),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", required=True, help="rows in all three files together: 100k, 1M, 4M, 10M")
    parser.add_argument("--out", required=True, type=Path, help="folder to write (created)")
    parser.add_argument("--seed", type=int, default=30)
    args = parser.parse_args(argv)
    manifest = generate(parse_rows(args.rows), args.out, args.seed)
    print(json.dumps({k: v for k, v in manifest.items() if k != "splits"}, indent=2), file=sys.stderr)


if __name__ == "__main__":
    main()
