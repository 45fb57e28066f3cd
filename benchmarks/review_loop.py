"""The review loop, simulated: does labelling a little of the traffic, chosen well, make a better model there?

    .venv/bin/python benchmarks/review_loop.py run --home /tmp/review-loop [--seed 42 --seed 7]
    .venv/bin/python benchmarks/review_loop.py table

A paraphrase cross-encoder is trained on MSRP alone (the first champion). Its traffic is STS-B: pairs whose
gold similarity is >= 4 count as paraphrases, <= 2 as not (the rest is left out), and STS-B pairs that
also sit in MSRP are dropped, so the model never saw a traffic pair or its label. The gold labels play the
reviewer. The traffic pool is STS-B train + dev; each night's traffic is a fresh batch of BATCH_PER_NIGHT
pairs drawn from it, the same for both arms. STS-B test, binarised the same way, is the held-out traffic:
never scored for a queue, never reviewed, read only for the figures below.

Each night, for each arm, the arm's current model scores the night's batch and the review queue is drawn
with the product's own rule (`simpair.review.queue.select_for_review`, nothing already queued):

- `uncertain`: 200 pairs nearest the model's threshold + 100 uniform random pairs. The 100 random pairs are
  the night's `traffic` split (judged on, never trained on); the 200 uncertain ones are training data.
- `random`: the same 300 reviews, all uniform random: 100 kept as its `traffic` split, 200 trained on.

So both arms pay for 300 labels a night and train on 200 of them. The reviews so far are written as the
arm's reviews dataset (`train` and `traffic` splits, the catalog layout `simpair review import` writes;
the import itself is tested in tests/test_review_night.py), and the night trains as a nightly task with
`reviews: {train: true, repeat: REPEAT}` does: MSRP train plus the reviewed training pairs (the traffic
split protected), warm-started from the arm's previous model for NIGHT_STEPS optimiser steps; the first
champion trains FIRST_STEPS (one epoch). Schedules are short because the machine is 2 shared CPU cores.
After each night: ROC-AUC and F1 on the held-out traffic (F1 at the model's own threshold, chosen on the
MSRP dev carve), and after the last night MSRP test accuracy and F1, beside the first champion and the
untrained backbone (cosine, threshold chosen on MSRP). The gate's traffic figure (new model against the
previous one on the night's traffic split, ROC-AUC with a 95% paired interval) is recorded too.

`run` trains the first champion (2 threads), then runs the first champion's figures and the two arms
side by side, one process and one thread each; results: benchmarks/results/review_loop.json.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import common
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import typer
import yaml

from simpair.catalog import Catalog
from simpair.metrics.binary_classification import binary_metrics
from simpair.metrics.paired_interval import paired_figures
from simpair.review.queue import ReviewPolicy, review_keys, select_for_review
from simpair.schema import QUARANTINE_SCHEMA

app = typer.Typer(add_completion=False, help=__doc__)
RESULTS = common.RESULTS_DIR / "review_loop.json"
NIGHTS = 3
UNCERTAIN, RANDOM = 200, 100
BATCH_PER_NIGHT = 700  # a night's traffic: fresh pairs of the pool, the same for both arms
FIRST_STEPS = 230  # one epoch of the MSRP train carve at batch 16
NIGHT_STEPS = 40
REPEAT = 6  # fixed before any figure was read: the 600 reviews of night 3 about half of its samples
NIGHT_LR = 5.0e-5
ARMS = {
    "uncertain": ReviewPolicy(uncertain=UNCERTAIN, random=RANDOM, disputed=0, challenger=None),
    "random": ReviewPolicy(uncertain=0, random=UNCERTAIN + RANDOM, disputed=0, challenger=None),
}
HOME = Annotated[Path, typer.Option(help="Pipeline home for this benchmark (ingested here if empty).")]


def _binarised(frame: pl.DataFrame) -> pl.DataFrame:
    """STS-B pairs as yes/no paraphrase traffic: gold >= 4 is 1, <= 2 is 0, the middle left out."""
    raw = pl.col("score_raw")
    return frame.filter((raw >= 4) | (raw <= 2)).with_columns((raw >= 4).cast(pl.Int8).alias("label"))


def traffic_sets(home: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pool, held-out): STS-B train + dev and STS-B test as traffic, keyed by the review key, without
    any pair that sits in MSRP (the model trained on those) and the held-out without any pool pair."""
    catalog = Catalog(home)
    msrp = pl.concat([catalog.read_split("msrp", s) for s in ("train", "test")])
    seen = set(review_keys(msrp["text_a"], msrp["text_b"]).to_list())

    def keyed(frame: pl.DataFrame) -> pl.DataFrame:
        frame = _binarised(frame).select("text_a", "text_b", "label", "score_raw")
        frame = frame.with_columns(review_keys(frame["text_a"], frame["text_b"]).alias("key"))
        return frame.filter(~pl.col("key").is_in(list(seen))).unique("key", keep="first", maintain_order=True)

    pool = keyed(pl.concat([catalog.read_split("stsb", s) for s in ("train", "dev")]))
    held = keyed(catalog.read_split("stsb", "test"))
    return pool, held.filter(~pl.col("key").is_in(pool["key"].implode()))


def write_reviews(home: Path, dataset: str, reviewed: pl.DataFrame, night: int) -> str:
    """The arm's reviews so far as a new version of `dataset` (`train`: uncertain and disputed pairs,
    `traffic`: random ones), in the catalog layout `simpair review import` produces."""
    from simpair.ingest.writer import set_current, write_version
    from simpair.schema import PAIR_SCHEMA

    version = f"night{night}"
    folder = home / "datasets" / dataset
    if (folder / version / "manifest.json").is_file():  # a resumed run: the same seed writes the same rows
        set_current(folder, version)
        return version
    staging = home / "staging" / dataset / version
    staging.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    splits = []
    for split, role in (("train", "train"), ("traffic", "test")):
        part = reviewed.filter(pl.col("split") == split)
        table = pl.DataFrame(
            {
                "pair_id": part["pair_id"],
                "text_a": part["text_a"],
                "text_b": part["text_b"],
                "label": part["label"].cast(pl.Int8),
                "score": pl.Series([None] * part.height, dtype=pl.Float32),
                "score_raw": pl.Series([None] * part.height, dtype=pl.Float64),
                "split": [split] * part.height,
                "dataset": [dataset] * part.height,
                "dataset_version": [version] * part.height,
                "source_file": [f"review-loop/{part_queue}" for part_queue in part["queue"]],
                "source_sha256": [""] * part.height,
                "source_line": pl.Series(range(part.height), dtype=pl.Int64),
            }
        ).to_arrow()
        path = staging / f"{split}.parquet"
        pq.write_table(table.cast(PAIR_SCHEMA), path)
        files[f"{split}.parquet"] = path
        splits.append({"split": split, "role": role, "report": {"clean": part.height}})
    empty = staging / "quarantine.parquet"
    pq.write_table(QUARANTINE_SCHEMA.empty_table(), empty)
    files["quarantine.parquet"] = empty
    folder.mkdir(parents=True, exist_ok=True)
    write_version(folder, version, files, {"dataset": dataset, "version": version, "splits": splits})
    set_current(folder, version)
    return version


def _config(
    name: str, home: Path, seed: int, steps: int, backbone: str | None, reviews: str | None, threads: int
) -> Path:
    """The night's training config: the project's MSRP paraphrase cross-encoder recipe
    (configs/experiments/msrp-cross-plain.yaml, MSRP only, so no traffic pair is ever trained on) with a
    short schedule, plus the arm's reviewed training pairs as a nightly task's `reviews:` block adds them."""
    config = yaml.safe_load((common.ROOT / "configs" / "experiments" / "msrp-cross-plain.yaml").read_text())
    train = [{"dataset": "msrp", "split": "train"}]
    evaluate_on = [{"dataset": "msrp", "split": "test"}]
    if reviews:
        train.append({"dataset": reviews, "split": "train", "repeat": REPEAT})
        evaluate_on.append({"dataset": reviews, "split": "traffic"})
    config.update(
        name=name, seed=seed, epochs=1, max_steps=steps, early_stopping_patience=None, train=train,
        evaluate_on=evaluate_on, output_dir=str(home / "models" / name), num_threads=threads, progress=False,
    )  # fmt: skip
    if backbone:  # warm start: the previous night's model, its head included
        config.update(backbone=backbone, learning_rate=NIGHT_LR)
    path = home / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def train(home: Path, config: Path) -> tuple[Path, float]:
    """One training in its own process (`simpair train`); the model folder and the wall seconds."""
    out = Path(yaml.safe_load(config.read_text())["output_dir"])
    if (out / "metrics.json").is_file():
        return out, 0.0
    started = time.monotonic()
    simpair = str(Path(sys.executable).with_name("simpair"))
    cmd = [simpair, "train", "--config", str(config), "--home", str(home), "--no-evaluate"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{config.name} failed: {done.stderr[-3000:]}")
    return out, time.monotonic() - started


class Scorer:
    """A model's probability and threshold on lists of pairs (cached per model and set)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, str], np.ndarray] = {}

    def __call__(self, model_dir: Path, name: str, frame: pl.DataFrame) -> tuple[np.ndarray, float]:
        from simpair.runtime.loader import load_predictor

        predictor = load_predictor(model_dir)
        key = (str(model_dir), name)
        if key not in self.cache:
            out = predictor.predict(frame["text_a"].to_list(), frame["text_b"].to_list(), batch_size=64)
            self.cache[key] = np.asarray(out.get("probability", out["score"]), dtype=np.float64)
        return self.cache[key], float(predictor.meta.threshold)


def figures(
    score: Scorer, model_dir: Path, held: pl.DataFrame, msrp: pl.DataFrame | None
) -> dict[str, float]:
    """Held-out traffic ROC-AUC and F1 and (given `msrp`) MSRP test accuracy and F1, each at the model's
    own threshold. MSRP test is read for the first champion, the backbone and each arm's last night only
    (1,725 pairs a model: the CPU time of a night's training)."""
    t_prob, threshold = score(model_dir, "held", held)
    traffic = binary_metrics(t_prob, held["label"].to_numpy(), threshold)
    out = {
        "traffic_roc_auc": traffic["roc_auc"],
        "traffic_f1": traffic["f1"],
        "traffic_accuracy": traffic["accuracy"],
        "threshold": threshold,
    }
    if msrp is not None:
        on_msrp = binary_metrics(score(model_dir, "msrp", msrp)[0], msrp["label"].to_numpy(), threshold)
        out |= {"msrp_f1": on_msrp["f1"], "msrp_accuracy": on_msrp["accuracy"]}
    return out


def _parts(home: Path) -> Path:
    folder = home / "parts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def first_and_backbone(home: Path, seed: int, train_seconds: float) -> dict[str, Any]:
    """The first champion (MSRP only, trained by `run`) and the untrained backbone on the held-out
    traffic and MSRP test."""
    from simpair.evaluation.zero_shot_baseline import zero_shot_model
    from simpair.models.tiny import default_backbone

    pool, held = traffic_sets(home)
    msrp = Catalog(home).read_split("msrp", "test").filter(pl.col("label").is_not_null())
    score = Scorer()
    out: dict[str, Any] = {
        "pool": pool.height,
        "held_out": held.height,
        "held_out_positive": int(held["label"].sum()),
    }
    first = home / "models" / f"rl-s{seed}-night0"
    out["first_train_seconds"] = train_seconds
    out["first_champion"] = figures(score, first, held, msrp)
    backbone = zero_shot_model(default_backbone(), "paraphrase", home, threshold_dataset="msrp", seed=seed)
    out["backbone"] = figures(score, backbone, held, msrp)
    print(f"seed {seed}: first champion {out['first_champion']}, backbone {out['backbone']}", flush=True)
    return out


def run_arm(home: Path, seed: int, arm: str, threads: int) -> list[dict[str, Any]]:
    """One arm's three nights from the seed's first champion: queue, review, retrain, measure."""
    pool, held = traffic_sets(home)
    msrp = Catalog(home).read_split("msrp", "test").filter(pl.col("label").is_not_null())
    score = Scorer()
    first = home / "models" / f"rl-s{seed}-night0"
    order = np.random.default_rng(seed).permutation(pool.height)
    batches = [pool[order[i * BATCH_PER_NIGHT : (i + 1) * BATCH_PER_NIGHT]] for i in range(NIGHTS)]
    policy = ARMS[arm].model_copy(update={"seed": seed})
    model, seen, reviewed, nights = first, set(), None, []
    dataset = f"reviews-{arm}-s{seed}"
    for night in range(1, NIGHTS + 1):
        batch = batches[night - 1]
        prob, threshold = score(model, f"batch{night}", batch)
        scored = batch.select("text_a", "text_b").with_columns(pl.Series("score", prob))
        queue = select_for_review(scored, threshold, policy, seen, run_id=f"night{night}")
        seen |= set(queue["pair_id"].to_list())
        gold = batch.select(pl.col("key").alias("pair_id"), "label")
        labelled = queue.join(gold, on="pair_id", how="inner")  # the reviewer: gold labels
        # the first RANDOM random pairs of each night are the traffic split; the rest are training data
        split = pl.when((pl.col("queue") == "random") & (pl.col("rank") < RANDOM)).then(pl.lit("traffic"))
        labelled = labelled.with_columns(split.otherwise(pl.lit("train")).alias("split"))
        reviewed = labelled if reviewed is None else pl.concat([reviewed, labelled])
        train_keys = set(reviewed.filter(pl.col("split") == "train")["pair_id"].to_list())
        assert not train_keys & set(reviewed.filter(pl.col("split") == "traffic")["pair_id"].to_list())
        write_reviews(home, dataset, reviewed, night)
        previous = model
        config = _config(
            f"rl-s{seed}-{arm}-night{night}", home, seed, NIGHT_STEPS, str(previous), dataset, threads
        )
        model, seconds = train(home, config)
        night_traffic = labelled.filter(pl.col("split") == "traffic")
        new_p, new_t = score(model, f"traffic{night}", night_traffic)
        old_p, old_t = score(previous, f"traffic{night}", night_traffic)
        gate = paired_figures("roc_auc", night_traffic["label"].to_numpy(), new_p, old_p, new_t, old_t)
        row = {
            "night": night,
            "reviews": reviewed.height,
            "trained_reviews": len(train_keys),
            "queue_positive_share": float(labelled["label"].mean()),
            "train_seconds": round(seconds, 1),
            "gate_traffic_roc_auc": {
                "pairs": gate.n,
                "new": gate.model,
                "previous": gate.reference,
                "delta": gate.delta,
                "delta_low": gate.delta_low,
                "delta_high": gate.delta_high,
            },  # fmt: skip
            **figures(score, model, held, msrp if night == NIGHTS else None),
        }
        nights.append(row)
        print(f"seed {seed} {arm} night {night}: {json.dumps(row)}", flush=True)
    return nights


@app.command()
def run(
    home: HOME,
    seed: Annotated[list[int] | None, typer.Option(help="Training seeds (default 42).")] = None,
) -> None:
    """Ingest if needed; per seed the first champion and the backbone, then both arms side by side (one
    process and one thread each), then merge everything into benchmarks/results/review_loop.json."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "datasets" / "stsb" / "CURRENT").is_file():
        from simpair.ingest import run_ingest

        print(run_ingest(common.SHARED, home).headline())
    started = time.monotonic()
    for s in seed or [42]:
        _, seconds = train(home, _config(f"rl-s{s}-night0", home, s, FIRST_STEPS, None, None, 2))
        print(f"seed {s}: first champion trained in {seconds:.0f} s", flush=True)
        me = [sys.executable, __file__]
        where = ["--home", str(home), "--seed", str(s)]
        jobs = [subprocess.Popen([*me, "first", *where, "--train-seconds", str(round(seconds, 1))])]
        jobs += [subprocess.Popen([*me, "arm", *where, "--arm", arm]) for arm in ARMS]
        if any(p.wait() != 0 for p in jobs):
            raise SystemExit(f"seed {s}: a part failed (see above)")
        merge(home, time.monotonic() - started)


@app.command()
def first(home: HOME, seed: int = 42, train_seconds: float = 0.0) -> None:
    """The first champion's and the backbone's figures (what `run` starts beside the arms)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    part = _parts(home) / f"first-s{seed}.json"
    if not part.is_file():
        part.write_text(json.dumps(first_and_backbone(home, seed, train_seconds)))


@app.command()
def arm(home: HOME, seed: int = 42, arm: str = "uncertain", threads: int = 1) -> None:
    """One arm of one seed (what `run` starts, one process per arm); its rows go to <home>/parts/."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    part = _parts(home) / f"{arm}-s{seed}.json"
    if not part.is_file():
        rows = run_arm(home, seed, arm, threads)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        part.write_text(json.dumps({"nights": rows, "peak_rss_mb": round(peak, 1)}))


@app.command()
def merge(home: HOME, wall_seconds: float = 0.0) -> None:
    """Every finished part under <home>/parts/ into benchmarks/results/review_loop.json."""
    results: dict[str, Any] = {
        "date": datetime.now(UTC).date().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs, no GPU",
        "command": ".venv/bin/python benchmarks/review_loop.py run --home /tmp/review-loop",
        "setup": {
            "nights": NIGHTS,
            "uncertain_per_night": UNCERTAIN,
            "random_per_night": RANDOM,
            "traffic_batch_per_night": BATCH_PER_NIGHT,
            "first_steps": FIRST_STEPS,
            "night_steps": NIGHT_STEPS,
            "night_learning_rate": NIGHT_LR,
            "reviews_repeat": REPEAT,
            "batch_size": 16,
            "recipe": "configs/experiments/msrp-cross-plain.yaml (MSRP only), 1 epoch capped by max_steps",
        },  # fmt: skip
        "wall_seconds": round(wall_seconds, 1),
        "seeds": {},
    }
    for first in sorted(_parts(home).glob("first-s*.json")):
        s = first.stem.removeprefix("first-s")
        row = json.loads(first.read_text())
        for name in ARMS:
            part = _parts(home) / f"{name}-s{s}.json"
            if part.is_file():
                done = json.loads(part.read_text())
                row[name], row[f"{name}_peak_rss_mb"] = done["nights"], done["peak_rss_mb"]
        results["seeds"][s] = row
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    typer.echo(f"wrote {RESULTS}")


def _cell(row: dict[str, Any], key: str) -> str:
    return f"{row[key]:.4f}" if key in row else "-"


@app.command()
def table() -> None:
    """The results as the markdown table docs/benchmarks.md shows."""
    results = json.loads(RESULTS.read_text())
    head = "| seed | model | reviews | held-out traffic ROC-AUC | traffic F1 | MSRP test F1 | MSRP accuracy |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for s, r in sorted(results["seeds"].items()):
        for label, row, n in (
            ("backbone (zero-shot)", r["backbone"], 0),
            ("first champion", r["first_champion"], 0),
        ):
            lines.append(
                f"| {s} | {label} | {n} | {row['traffic_roc_auc']:.4f} | {row['traffic_f1']:.4f} "
                f"| {row['msrp_f1']:.4f} | {row['msrp_accuracy']:.4f} |"
            )
        for arm in ARMS:
            for row in r.get(arm, []):
                lines.append(
                    f"| {s} | {arm}, night {row['night']} | {row['reviews']} | {row['traffic_roc_auc']:.4f} "
                    f"| {row['traffic_f1']:.4f} | {_cell(row, 'msrp_f1')} | {_cell(row, 'msrp_accuracy')} |"
                )
    typer.echo("\n".join(lines))


if __name__ == "__main__":
    app()
