"""Augmented SBERT probe (Thakur et al., 2021): silver STS-B pairs labelled by a teacher (run by hand).

    .venv/bin/python benchmarks/silver_pairs.py --home H --searcher BI_MODEL --teacher CROSS_MODEL
    nice -n 5 .venv/bin/python benchmarks/quality.py run stsb-bi --label stsb-bi-silver --home H \
        --set num_threads=1 \
        --set 'train=[{dataset: stsb, split: train}, {dataset: stsb-silver, split: train}]' \
        --set batch_per_dataset=false

The paper's in-domain recipe: pair each STS-B train sentence with its nearest train sentences
(semantic search with a bi-encoder), let a cross-encoder score those pairs, and train the bi-encoder
on gold + silver. The sampler only combines train sentences and drops every pair that some ingested
split already holds, so no evaluation pair becomes training data. The silver set is written as its
own dataset (`<home>/datasets/<name>/`, one train split) so configs name it like any other.
Kept out of the pipeline: on this backbone it did not help (docs/experiments.md, 2026-11-24).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import numpy as np
import polars as pl
import typer

from simpair.catalog import Catalog
from simpair.runtime.loader import load_predictor

app = typer.Typer(add_completion=False)


def nearest_pairs(
    sentences: list[str], embeddings: np.ndarray, k: int, skip: set[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Each sentence with its k nearest others (cosine), as sorted text pairs not in `skip`."""
    pairs: set[tuple[str, str]] = set()
    for start in range(0, len(sentences), 1024):
        sim = embeddings[start : start + 1024] @ embeddings.T
        for row in range(sim.shape[0]):
            i = start + row
            sim[row, i] = -np.inf
            top = np.argpartition(-sim[row], k + 5)[: k + 5]
            taken = 0
            for j in top[np.argsort(-sim[row, top])]:
                key = tuple(sorted((sentences[i], sentences[j])))
                if key[0] == key[1] or key in skip:
                    continue
                pairs.add(key)  # type: ignore[arg-type]
                taken += 1
                if taken == k:
                    break
    return sorted(pairs)


@app.command()
def main(
    home: Annotated[Path, typer.Option(help="Pipeline home with ingested stsb (and any other dataset).")],
    searcher: Annotated[Path, typer.Option(help="Bi-encoder that finds each sentence's neighbours.")],
    teacher: Annotated[Path, typer.Option(help="Model whose scores become the silver labels.")],
    name: Annotated[
        str, typer.Option(help="Dataset name the silver pairs are written under.")
    ] = "stsb-silver",
    k: Annotated[int, typer.Option(help="Neighbours per sentence.")] = 3,
    size: Annotated[int | None, typer.Option(help="Silver pairs kept (default: as many as gold).")] = None,
    seed: int = 0,
) -> None:
    catalog = Catalog(home)
    train = catalog.read_split("stsb", "train")
    known: set[tuple[str, str]] = set()
    for dataset in catalog.datasets():
        for split in catalog.splits(dataset):
            frame = catalog.read_split(dataset, split)
            known |= {tuple(sorted(p)) for p in zip(frame["text_a"], frame["text_b"], strict=True)}  # type: ignore[misc]
    sentences = sorted(set(train["text_a"]) | set(train["text_b"]))
    embeddings = load_predictor(searcher).embed(sentences, progress=True)
    candidates = nearest_pairs(sentences, embeddings, k, known)
    keep = size or train.height
    picked = np.sort(
        np.random.default_rng(seed).choice(len(candidates), size=min(keep, len(candidates)), replace=False)
    )
    text_a = [candidates[i][0] for i in picked]
    text_b = [candidates[i][1] for i in picked]
    score = load_predictor(teacher).predict(text_a, text_b, progress=True)["score"]
    # content-addressed like ingest's versions: other pairs or other labels make another version
    version = hashlib.sha256(json.dumps([text_a, text_b, score.round(6).tolist()]).encode()).hexdigest()[:16]
    folder = home / "datasets" / name / version
    folder.mkdir(parents=True, exist_ok=True)
    silver = (
        pl.DataFrame(
            {
                "pair_id": [f"{name}-{i:05d}" for i in range(len(text_a))],
                "text_a": text_a,
                "text_b": text_b,
                "label": pl.Series([None] * len(text_a), dtype=pl.Int8),
                "score": pl.Series(score, dtype=pl.Float32),
                "score_raw": pl.Series(score * 5.0, dtype=pl.Float64),
                "split": "train",
                "dataset": name,
                "dataset_version": version,
                "source_file": f"silver from {teacher.name}",
                "source_sha256": "0" * 64,
                "source_line": pl.Series(range(1, len(text_a) + 1), dtype=pl.Int64),
            }
        )
        .select(train.columns)
        .cast(train.schema)
    )
    silver.write_parquet(folder / "train.parquet")
    manifest = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "silver": {
            "searcher": str(searcher),
            "teacher": str(teacher),
            "k": k,
            "candidates": len(candidates),
            "seed": seed,
        },
        "splits": [{"split": "train", "role": "train", "report": {"clean": silver.height}}],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    (home / "datasets" / name / "CURRENT").write_text(version)
    print(
        f"{silver.height} silver pairs (of {len(candidates)} candidates), teacher score mean "
        f"{float(score.mean()):.3f} sd {float(score.std()):.3f} -> {folder}"
    )


if __name__ == "__main__":
    app()
