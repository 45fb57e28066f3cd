"""Transfer proxy: how an STS model does on a genre it never saw, against the untrained backbone.

    nice -n 5 .venv/bin/python benchmarks/transfer.py train --home /tmp/xfer [--jobs 2]
    nice -n 5 .venv/bin/python benchmarks/transfer.py proxy --home /tmp/xfer
    .venv/bin/python benchmarks/transfer.py choose

Leave-one-genre-out on STS-B: for each genre (news, captions, forums, recognised by the source file that
starts every STS-B pair id) `train` fine-tunes `configs/stsb-bi.yaml` with that genre left out of both
train and dev (so it cannot steer early stopping either). `proxy` scores the held-out genre's pairs of
the train and dev splits (never test) with each model interpolated toward the pre-trained backbone
(WiSE-FT, Wortsman et al. 2022) at every alpha of the grid; alpha 0 is the untrained backbone itself
(mean pooling, cosine), alpha 1 the plain fine-tune. `choose` applies the rule fixed before any number
was read (RULE below). Results go to benchmarks/results/transfer.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "transfer.json"
GENRES = {
    "news": r"^(MSRpar|headlines|deft-news)-",
    "captions": r"^(MSRvid|images|track5\.en-en)-",
    "forums": r"^(deft-forum|answers-forums|answer-answer)-",
}
ALPHAS = [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
RULE = (
    "alpha maximising the mean over held-out genres of (Spearman - zero-shot Spearman); "
    "ties (within 0.001) go to the larger alpha, which keeps more of the fine-tune"
)

app = typer.Typer(add_completion=False)
HOME = Annotated[Path, typer.Option(help="Pipeline home with ingested stsb.")]


def _load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def _save(results: dict[str, Any]) -> None:
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


def _logo_config(genre: str, home: Path, threads: int) -> Path:
    config = yaml.safe_load((REPO / "configs" / "stsb-bi.yaml").read_text())
    config.update(
        name=f"logo-{genre}",
        train=[{"dataset": "stsb", "split": "train", "exclude_pair_ids": GENRES[genre]}],
        dev={"split": "dev", "exclude_pair_ids": GENRES[genre]},
        evaluate_on=[],
        output_dir=str(home / "models" / f"logo-{genre}"),
        num_threads=threads,
        progress=False,
    )
    path = home / "configs" / f"logo-{genre}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@app.command()
def train(home: HOME, jobs: int = 2, genre: list[str] | None = None) -> None:
    """Fine-tune one leave-one-genre-out model per genre (`jobs` at a time, cores split between them)."""
    threads = max(1, (os.cpu_count() or 2) // jobs)
    simpair = str(Path(sys.executable).with_name("simpair"))

    def one(g: str) -> str:
        cmd = [simpair, "train", "--config", str(_logo_config(g, home, threads)), "--home", str(home),
               "--no-evaluate"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"logo-{g} failed: {done.stderr[-2000:]}")
        return g

    with ThreadPoolExecutor(jobs) as pool:
        for g in pool.map(one, genre or list(GENRES)):
            typer.echo(f"trained logo-{g}")


@app.command()
def proxy(home: HOME, alphas: str = ",".join(map(str, ALPHAS))) -> None:
    """Held-out-genre Spearman of each leave-one-genre-out model at every WiSE-FT alpha."""
    import polars as pl

    from simpair.catalog import Catalog
    from simpair.evaluation.graded_similarity import graded_metrics
    from simpair.models import ModelMetadata, build_model
    from simpair.models.tiny import default_backbone
    from simpair.predictors import load_predictor
    from simpair.training.averaging import interpolate

    catalog = Catalog(home)
    pairs = pl.concat([catalog.read_split("stsb", s).select("pair_id", "text_a", "text_b", "score")
                       for s in ("train", "dev")])  # fmt: skip
    grid = [float(x) for x in alphas.split(",")]
    results = _load()
    results.update(
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        command="benchmarks/transfer.py train + proxy --home HOME",
        alphas=grid,
        rule=RULE,
        genres={},
    )
    for genre, pattern in GENRES.items():
        model_dir = home / "models" / f"logo-{genre}"
        held = pairs.filter(pl.col("pair_id").str.contains(pattern))
        predictor = load_predictor(model_dir)
        meta = ModelMetadata.read(model_dir)
        tuned = {k: v.detach().clone() for k, v in predictor.model.state_dict().items()}
        base = build_model(meta.kind, default_backbone()).state_dict()
        a, b, gold = held["text_a"].to_list(), held["text_b"].to_list(), held["score"].to_numpy()
        row: dict[str, float] = {}
        for alpha in grid:
            predictor.model.load_state_dict(interpolate(base, tuned, alpha))
            row[str(alpha)] = graded_metrics(predictor.predict_raw(a, b), gold)["spearman"]
            typer.echo(f"{genre} alpha {alpha}: spearman {row[str(alpha)]:.4f}")
        dev = json.loads((model_dir / "metrics.json").read_text())["dev"]["spearman"]
        results["genres"][genre] = {"pairs": held.height, "spearman_by_alpha": row, "dev_without_genre": dev}
    _save(results)


@app.command()
def choose() -> None:
    """The rule, applied: print the table and the chosen alpha."""
    results = _load()
    genres = results["genres"]
    grid = results["alphas"]
    gains = {
        a: sum(g["spearman_by_alpha"][str(a)] - g["spearman_by_alpha"]["0.0"] for g in genres.values())
        / len(genres)
        for a in grid
    }
    best = max(gains.values())
    chosen = max(a for a in grid if gains[a] >= best - 0.001)
    typer.echo("| alpha | " + " | ".join(genres) + " | mean gain over zero-shot |")
    typer.echo("|---|" + "---|" * (len(genres) + 1))
    for a in grid:
        cells = " | ".join(f"{g['spearman_by_alpha'][str(a)]:.4f}" for g in genres.values())
        typer.echo(f"| {a} | {cells} | {gains[a]:+.4f} |")
    typer.echo(f"chosen alpha: {chosen} ({RULE})")
    results["chosen_alpha"] = chosen
    results["mean_gain_by_alpha"] = {str(a): v for a, v in gains.items()}
    _save(results)


@app.command()
def apply(model_dir: Path, home: HOME, alpha: float | None = None) -> None:
    """WiSE-FT at the chosen alpha on a full-data model; calibration refitted on its dev split.

    Writes MODEL_DIR-wise<alpha> and records its dev Spearman beside the model's own.
    """
    from simpair.catalog import Catalog
    from simpair.evaluation.graded_similarity import graded_metrics
    from simpair.models import ModelMetadata, build_model, save_model
    from simpair.models.tiny import default_backbone
    from simpair.predictors import load_predictor
    from simpair.training import calibration
    from simpair.training.averaging import interpolate

    results = _load()
    alpha = results["chosen_alpha"] if alpha is None else alpha
    predictor = load_predictor(model_dir)
    meta = ModelMetadata.read(model_dir)
    dev = Catalog(home).read_split("stsb", "dev")
    a, b, gold = dev["text_a"].to_list(), dev["text_b"].to_list(), dev["score"].to_numpy()
    before = graded_metrics(predictor.predict_raw(a, b), gold)["spearman"]
    base = build_model(meta.kind, default_backbone()).state_dict()
    predictor.model.load_state_dict(interpolate(base, predictor.model.state_dict(), alpha))
    raw = predictor.predict_raw(a, b)
    meta.calibration = calibration.graded(raw, gold)
    after = graded_metrics(raw, gold)["spearman"]
    target = model_dir.with_name(f"{model_dir.name}-wise{alpha}")
    metrics = json.loads((model_dir / "metrics.json").read_text())
    metrics["dev"] = graded_metrics(calibration.apply(meta.calibration, raw), gold)
    metrics["wise_ft"] = {"alpha": alpha, "chosen_on": "leave-one-genre-out proxy (benchmarks/transfer.py)"}
    text_files = {f: (model_dir / f).read_text() for f in ("dev_pair_ids.txt", "train_pairs.txt")}
    config = (
        (model_dir / "train_config.yaml").read_text() if (model_dir / "train_config.yaml").is_file() else None
    )
    save_model(predictor.model.cpu(), predictor.tokenizer, target, meta, train_config_yaml=config,
               metrics=metrics, text_files=text_files)  # fmt: skip
    results.setdefault("applied", {})[model_dir.name] = {
        "alpha": alpha,
        "dev_before": before,
        "dev_after": after,
    }
    _save(results)
    typer.echo(f"{target}: dev spearman {before:.4f} -> {after:.4f} at alpha {alpha}")


if __name__ == "__main__":
    app()
