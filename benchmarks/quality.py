"""Quality and speed benchmark for the training stage (run by hand, never in tests).

    nice -n 5 .venv/bin/python benchmarks/quality.py          # all defaults, in $SIMPAIR_HOME (~1 h)
    nice -n 5 .venv/bin/python benchmarks/quality.py run msrp-cross --home /tmp/simhome
    nice -n 5 .venv/bin/python benchmarks/quality.py record msrp-cross MODEL_DIR --home /tmp/simhome
    nice -n 5 .venv/bin/python benchmarks/quality.py throughput --home /tmp/simhome --kind cross
    .venv/bin/python benchmarks/quality.py table

`run NAME` trains `configs/NAME.yaml` (with `--set k=v` overrides), evaluates it on the config's
evaluation splits (threshold from dev, leaked pairs excluded) and records the row. `record` does the
same for a model already trained. `throughput` trains ours and sentence-transformers' `fit` on the same
pairs, batch size and thread count, back to back in one process, and records both samples/s (the
machine is shared, so only the ratio measured in one run means anything). `table` regenerates the
tables of docs/benchmarks.md (default configs only) and docs/experiments.md (every row) from
benchmarks/results/*.json (benchmarks/pages.py); the prose around them is hand-written.
Requires the `bench` extra (sentence-transformers, datasets) for `throughput` only.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "quality.json"

app = typer.Typer(add_completion=False)
HOME = Annotated[Path, typer.Option(help="Pipeline home with ingested msrp and stsb.")]


def _load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {"runs": {}, "throughput": {}}


def _save(results: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


def _post_note(remove_directions: int | None) -> str:
    """How a row's bi-encoder post-processes its embeddings (empty when it does not)."""
    return f", centred - {remove_directions} dir." if remove_directions is not None else ""


def _overrides(values: list[str] | None) -> dict[str, Any]:
    return {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in values or [])}


def _cpu_model() -> str:
    """The CPU model name: runs on different hosts are only comparable knowing which."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _record(
    name: str, model_dir: Path, home: Path, command: str, wall: float | None, splits: list[str] | None = None
) -> dict[str, Any]:
    from simpair.evaluation.splits import evaluate_model
    from simpair.training import TrainConfig

    config = TrainConfig.from_yaml(model_dir / "train_config.yaml")
    metrics = json.loads((model_dir / "metrics.json").read_text())
    pairs = [tuple(s.split("/", 1)) for s in splits] if splits else None
    pairs = pairs or [(r.dataset, r.split) for r in config.evaluate_on]
    ev = evaluate_model(model_dir, home, pairs, out_dir=home / "evaluations" / f"bench-{name}")
    row = {
        "name": name,
        "model_dir": str(model_dir),
        "kind": config.kind,
        "objective": config.objective
        + _post_note(config.postprocess.remove_directions if config.postprocess else None),
        "task": config.task,
        "train": [
            f"{r.label()} (stage 1)" for r in (config.intermediate.train if config.intermediate else [])
        ]
        + [r.label() for r in config.train],
        "init_from": config.backbone if config.backbone and Path(config.backbone).is_dir() else None,
        "epochs_run": len(metrics["history"]),
        "best_epoch": metrics["best_epoch"],
        "dev": metrics["dev"],
        "test": ev.metrics["splits"],
        "train_seconds": metrics["train_seconds"],
        "wall_seconds": wall if wall is not None else metrics["wall_seconds"],
        "train_samples_per_s": metrics["train_samples_per_s"],
        "config": config.model_dump(mode="json"),
        "command": command,
        "cpu_threads": config.num_threads,
        "loadavg_at_end": os.getloadavg()[0],
        # what ran, not what was asked: `precision: bf16` falls back to fp32 without native bf16
        "autocast": metrics.get("autocast"),
        "cpu": _cpu_model(),
    }
    results = _load()
    results["runs"][name] = row
    _save(results)
    typer.echo(json.dumps({k: row[k] for k in ("name", "dev", "test", "wall_seconds")}, indent=1))
    return row


@app.command()
def run(
    name: str,
    home: HOME,
    config: Annotated[
        Path | None, typer.Option(help="Default: configs/NAME.yaml, else configs/experiments/NAME.yaml")
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set")] = None,
    label: Annotated[str | None, typer.Option(help="Row name (default: NAME)")] = None,
) -> None:
    """Train configs/NAME.yaml (or configs/experiments/NAME.yaml), evaluate on its evaluate_on splits,
    record the row."""
    from simpair import settings
    from simpair.training import TrainConfig, train

    shipped = settings.configs_dir() / f"{name}.yaml"
    path = config or (
        shipped if shipped.is_file() else settings.configs_dir() / "experiments" / f"{name}.yaml"
    )
    cfg = TrainConfig.from_yaml(path)
    if set_:
        cfg = cfg.with_overrides(**_overrides(set_))
    started = time.perf_counter()
    result = train(cfg, home)
    wall = time.perf_counter() - started
    # a path given as a setting (a soup as backbone) names a folder on the measuring machine only
    sets = "".join(f" --set {re.sub(r'=/.*/', '=MODEL_DIR/', s)}" for s in set_ or [])
    command = f"nice -n 5 .venv/bin/python benchmarks/quality.py run {name} --home HOME{sets}"
    _record(label or name, result.model_dir, home, command, wall)


@app.command()
def record(
    name: str,
    model_dir: Path,
    home: HOME,
    command: str = "",
    split: Annotated[list[str] | None, typer.Option(help="DATASET/SPLIT; default: evaluate_on")] = None,
) -> None:
    """Evaluate an already trained model directory and record it under NAME."""
    _record(name, model_dir, home, command or "(trained separately; see train_config.yaml)", None, split)


def _speed_config(name: str, kind: str, objective: str, pairs: int, batch_size: int, threads: int) -> Any:
    """A one-epoch run on the first `pairs` train pairs (MSRP for cross, STS-B for bi): a speed probe."""
    from simpair.training import TrainConfig

    dataset, task = ("msrp", "paraphrase") if kind == "cross" else ("stsb", "sts")
    return TrainConfig(
        name=name,
        task=task,  # type: ignore[arg-type]
        kind=kind,  # type: ignore[arg-type]
        objective=objective,
        train=[{"dataset": dataset, "split": "train"}],
        dev={"split": None, "carve_fraction": 0.1} if kind == "cross" else {"split": "dev"},
        max_dev_samples=16,
        max_train_samples=pairs,
        epochs=1,
        batch_size=batch_size,
        num_threads=threads,
        progress=False,
    )


@app.command()
def throughput(
    home: HOME,
    kind: Annotated[str, typer.Option(help="cross or bi")] = "cross",
    pairs: int = 480,
    batch_size: int = 16,
    threads: int = 1,
) -> None:
    """samples/s of ours vs sentence-transformers fit() on the same pairs, batch and threads."""
    import torch
    from sentence_transformers import CrossEncoder, InputExample, SentenceTransformer, losses
    from torch.utils.data import DataLoader

    from simpair.catalog import Catalog
    from simpair.models import default_backbone
    from simpair.training import train

    torch.set_num_threads(threads)
    dataset, split = ("msrp", "train") if kind == "cross" else ("stsb", "train")
    frame = Catalog(home).read_split(dataset, split).head(pairs)
    target = "label" if kind == "cross" else "score"
    examples = [
        InputExample(texts=[a, b], label=float(y))
        for a, b, y in zip(frame["text_a"], frame["text_b"], frame[target], strict=True)
    ]
    loader = DataLoader(examples, shuffle=True, batch_size=batch_size)
    if kind == "cross":
        st_model = CrossEncoder(str(default_backbone()), num_labels=1, max_length=128)
        started = time.perf_counter()
        st_model.fit(train_dataloader=loader, epochs=1, warmup_steps=3, show_progress_bar=False)
    else:
        st_model = SentenceTransformer(str(default_backbone()))
        started = time.perf_counter()
        st_model.fit(
            train_objectives=[(loader, losses.CosineSimilarityLoss(st_model))],
            epochs=1,
            warmup_steps=3,
            show_progress_bar=False,
        )
    st_seconds = time.perf_counter() - started
    objective = "bce" if kind == "cross" else "cosine_mse"
    cfg = _speed_config(f"throughput-{kind}", kind, objective, pairs, batch_size, threads).with_overrides(
        output_dir=str(home / "models" / f"throughput-{kind}")
    )
    ours = train(cfg, home)
    row = {
        "kind": kind,
        "pairs": pairs,
        "batch_size": batch_size,
        "threads": threads,
        "sentence_transformers_fit_samples_per_s": pairs / st_seconds,
        "sentence_transformers_fit_seconds": st_seconds,
        "simpair_samples_per_s": ours.metrics["train_samples_per_s"],
        "simpair_train_seconds": ours.metrics["train_seconds"],
        "note": "ST seconds = the whole fit() call (includes its trainer set-up); ours = the training loop",
        "loadavg": os.getloadavg()[0],
        "command": f"nice -n 5 .venv/bin/python benchmarks/quality.py throughput --home HOME --kind {kind}",
    }
    row["speedup"] = row["simpair_samples_per_s"] / row["sentence_transformers_fit_samples_per_s"]
    results = _load()
    results["throughput"][kind] = row
    _save(results)
    typer.echo(json.dumps(row, indent=1))


@app.command()
def precision(
    home: HOME,
    kind: Annotated[str, typer.Option(help="cross or bi")] = "bi",
    pairs: int = 320,
    rounds: int = 3,
    batch_size: int = 16,
    threads: int = 1,
) -> None:
    """Training samples/s with fp32 and with bf16 autocast, taking turns on the same pairs.

    Rounds alternate fp32 / bf16 so a noisy shared machine slows both alike; the ratio of medians is
    the figure. Quality at each precision comes from full `run` rows (e.g. stsb-bi vs stsb-bi-bf16).
    """
    import statistics

    import torch

    from simpair.models.device import native_bf16
    from simpair.training import train

    objective = "bce" if kind == "cross" else "cosent"
    base = _speed_config(f"precision-{kind}", kind, objective, pairs, batch_size, threads)
    speeds: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(rounds):
        for name in speeds:
            out = home / "models" / f"precision-{kind}-{name}"
            cfg = base.with_overrides(precision=name, output_dir=str(out))
            speeds[name].append(train(cfg, home).metrics["train_samples_per_s"])
    fp32, bf16 = statistics.median(speeds["fp32"]), statistics.median(speeds["bf16"])
    row = {
        "kind": kind,
        "pairs": pairs,
        "rounds": rounds,
        "batch_size": batch_size,
        "threads": threads,
        "native_bf16": native_bf16(torch.device("cpu")),
        "fp32_samples_per_s": speeds["fp32"],
        "bf16_samples_per_s": speeds["bf16"],
        "speedup": bf16 / fp32,
        "loadavg": os.getloadavg()[0],
        "command": f"nice -n 5 .venv/bin/python benchmarks/quality.py precision --home HOME --kind {kind}",
    }
    results = _load()
    results.setdefault("precision", {})[kind] = row
    _save(results)
    typer.echo(json.dumps(row, indent=1))


def _record_combined(
    name: str,
    out: Path,
    member: list[Path],
    home: Path,
    kind: str,
    objective: str,
    fit_seconds: float,
    command: str,
) -> None:
    """Evaluate a model made from trained members (stack, soup) on the first member's evaluate_on splits;
    its wall time is the members' training wall times plus the combining."""
    from simpair.evaluation.splits import evaluate_model
    from simpair.training import TrainConfig

    configs = [TrainConfig.from_yaml(m / "train_config.yaml") for m in member]
    splits = [(r.dataset, r.split) for r in configs[0].evaluate_on]
    ev = evaluate_model(out, home, splits, out_dir=home / "evaluations" / f"bench-{name}")
    metrics = json.loads((out / "metrics.json").read_text())
    member_metrics = [json.loads((m / "metrics.json").read_text()) for m in member]
    row = {
        "name": name,
        "model_dir": str(out),
        "kind": kind,
        "objective": objective,
        "task": configs[0].task,
        "train": sorted({r.label() for c in configs for r in c.train}),
        "init_from": None,
        "epochs_run": "+".join(str(len(m.get("history", []))) for m in member_metrics),
        "dev": metrics["dev"],
        "test": ev.metrics["splits"],
        "wall_seconds": sum(m["wall_seconds"] for m in member_metrics) + fit_seconds,
        "fit_seconds": fit_seconds,
        "train_samples_per_s": None,
        "config": {"members": [str(m) for m in member], "precision": "+".join(c.precision for c in configs)},
        "command": command,
        "loadavg_at_end": os.getloadavg()[0],
    }
    results = _load()
    results["runs"][name] = row
    _save(results)
    typer.echo(json.dumps({k: row[k] for k in ("name", "dev", "test", "wall_seconds")}, indent=1))


MEMBERS = Annotated[list[Path], typer.Option("--member", help="Trained member model directory (repeat).")]


@app.command()
def stack(
    name: str,
    member: MEMBERS,
    home: HOME,
    lexical: bool = True,
    zero_shot: bool = False,
    products: bool = False,
) -> None:
    """Stack trained members (ridge/logistic on their outputs, fitted on their shared dev split)."""
    from simpair.ensemble import fit_stack

    started = time.perf_counter()
    out_dir = home / "models" / f"bench-{name}"
    out = fit_stack(member, home, out_dir, lexical=lexical, zero_shot=zero_shot, products=products)
    spec = json.loads((out / "metrics.json").read_text())["stack"]
    names = [m.name for m in member] + (["zero-shot backbone"] if zero_shot else [])
    extras = ([] if lexical else ["no lexical features"]) + (["member products"] if products else [])
    objective = f"{spec['combiner']} on " + " + ".join(names) + (f" ({', '.join(extras)})" if extras else "")
    flags = " ".join("--member MODEL_DIR" for _ in member) + (" --zero-shot" if zero_shot else "")
    flags += ("" if lexical else " --no-lexical") + (" --products" if products else "")
    command = f"benchmarks/quality.py stack {name} {flags} --home HOME"
    _record_combined(name, out, member, home, "stacked", objective, time.perf_counter() - started, command)


@app.command()
def soup(
    name: str,
    member: MEMBERS,
    home: HOME,
    remove_directions: Annotated[int | None, typer.Option(help="embedding post-processing")] = None,
) -> None:
    """Greedy weight soup of fine-tunes of one backbone (e.g. two seeds), chosen on dev."""
    from simpair.ensemble import fit_soup

    started = time.perf_counter()
    out = fit_soup(member, home, home / "models" / f"bench-{name}", remove_directions)
    meta = json.loads((out / "simpair.json").read_text())
    kept = json.loads((out / "metrics.json").read_text())["soup"]["kept"]
    tried = f" (of {len(member)} tried)" if len(kept) < len(member) else ""
    post = _post_note((meta.get("embedding_postprocess") or {}).get("remove_directions"))
    objective = f"{meta['objective']}, soup of {len(kept)}{tried}{post}"
    flags = " ".join("--member MODEL_DIR" for _ in member)
    flags += f" --remove-directions {remove_directions}" if remove_directions is not None else ""
    command = f"benchmarks/quality.py soup {name} {flags} --home HOME"
    _record_combined(name, out, member, home, meta["kind"], objective, time.perf_counter() - started, command)


def _dev_frame(model_dir: Path, home: Path) -> Any:
    """The model's own dev pairs (from dev_pair_ids.txt and its train config), with texts and gold."""
    from simpair.catalog import Catalog
    from simpair.training import TrainConfig

    config = TrainConfig.from_yaml(model_dir / "train_config.yaml")
    dataset = config.dev.dataset or config.train[0].dataset
    split = config.dev.split or next(r.split for r in config.train if r.dataset == dataset)
    ids = (model_dir / "dev_pair_ids.txt").read_text().split()
    frame = Catalog(home).read_split(dataset, split)
    return frame.filter(frame["pair_id"].is_in(ids))


@app.command()
def symmetric(name: str, model_dir: Path, home: HOME) -> None:
    """Variant of a trained cross-encoder that averages both input orders at prediction.

    The decision threshold is re-chosen on the model's own dev pairs (never on test); the copy is
    recorded as its own row, so the gain (or loss) of test-time symmetry is measured, not assumed.
    """
    import shutil

    from simpair.evaluation import best_threshold, binary_metrics
    from simpair.models import ModelMetadata
    from simpair.runtime.loader import load_predictor

    target = home / "models" / f"{model_dir.name}-sym"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(model_dir, target)
    meta = ModelMetadata.read(target)
    meta.symmetric = True
    meta.write(target)
    dev = _dev_frame(target, home)
    prob = load_predictor(target).predict(dev["text_a"].to_list(), dev["text_b"].to_list())["probability"]
    meta.threshold = best_threshold(prob, dev["label"].to_numpy(), "accuracy")
    meta.write(target)
    metrics = json.loads((target / "metrics.json").read_text())
    metrics["dev"] = binary_metrics(prob, dev["label"].to_numpy(), meta.threshold)
    (target / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    _record(name, target, home, f"benchmarks/quality.py symmetric {name} MODEL_DIR --home HOME", None)


@app.command()
def calibrate(name: str, model_dir: Path, home: HOME) -> None:
    """Copy of a bi-encoder STS model with the dev-fitted monotone score map (for models trained
    before training fitted it itself); recorded as its own row."""
    import shutil

    from simpair.evaluation import graded_metrics
    from simpair.models import ModelMetadata
    from simpair.runtime.loader import load_predictor
    from simpair.training import calibration

    target = home / "models" / f"{model_dir.name}-cal"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(model_dir, target)
    dev = _dev_frame(target, home)
    raw = load_predictor(target).predict_raw(dev["text_a"].to_list(), dev["text_b"].to_list())
    meta = ModelMetadata.read(target)
    meta.calibration = calibration.graded(raw, dev["score"].to_numpy())
    meta.write(target)
    metrics = json.loads((target / "metrics.json").read_text())
    metrics["dev"] = graded_metrics(calibration.apply(meta.calibration, raw), dev["score"].to_numpy())
    (target / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    _record(name, target, home, f"benchmarks/quality.py calibrate {name} MODEL_DIR --home HOME", None)


@app.command()
def wise(
    name: str,
    model_dir: Path,
    home: HOME,
    alphas: str = "0.5,0.6,0.7,0.8,0.9",
) -> None:
    """WiSE-FT: interpolate a trained model with its pre-trained backbone, alpha chosen on dev."""

    from simpair.evaluation import best_threshold, binary_metrics, graded_metrics
    from simpair.models import ModelMetadata, build_model, save_model
    from simpair.models.tiny import default_backbone
    from simpair.runtime.loader import load_predictor
    from simpair.training import calibration
    from simpair.training.averaging import choose_interpolation

    pred = load_predictor(model_dir)
    meta = ModelMetadata.read(model_dir)
    base = build_model(meta.kind, default_backbone()).state_dict()
    dev = _dev_frame(model_dir, home)
    a, b = dev["text_a"].to_list(), dev["text_b"].to_list()

    def dev_score(_: Any) -> float:
        raw = pred.predict_raw(a, b)
        if meta.task == "sts":
            return graded_metrics(raw, dev["score"].to_numpy())["spearman"]
        probs = pred.from_raw(raw)["probability"] if meta.kind == "cross" else raw
        return binary_metrics(probs, dev["label"].to_numpy(), best_threshold(probs, dev["label"].to_numpy()))[
            "accuracy"
        ]

    alpha, scores = choose_interpolation(pred.model, base, [float(x) for x in alphas.split(",")], dev_score)
    typer.echo(f"dev scores by alpha: {scores}; chosen {alpha}")
    raw = pred.predict_raw(a, b)
    if meta.task == "sts" and meta.kind == "bi":
        meta.calibration = calibration.graded(raw, dev["score"].to_numpy())
        dev_metrics = graded_metrics(calibration.apply(meta.calibration, raw), dev["score"].to_numpy())
    elif meta.task == "sts":
        dev_metrics = graded_metrics(pred.from_raw(raw)["score"], dev["score"].to_numpy())
    else:
        if meta.kind == "bi":
            meta.calibration = calibration.platt(raw, dev["label"].to_numpy())
        pred.meta = meta
        probs = pred.from_raw(raw)["probability"]
        meta.threshold = best_threshold(probs, dev["label"].to_numpy())
        dev_metrics = binary_metrics(probs, dev["label"].to_numpy(), meta.threshold)
    target = home / "models" / f"{model_dir.name}-wise"
    metrics = json.loads((model_dir / "metrics.json").read_text())
    metrics["dev"] = dev_metrics
    metrics["wise_ft"] = {"alpha": alpha, "dev_by_alpha": {str(k): v for k, v in scores.items()}}
    text_files = {f: (model_dir / f).read_text() for f in ("dev_pair_ids.txt", "train_pairs.txt")}
    save_model(
        pred.model.cpu(),
        pred.tokenizer,
        target,
        meta,
        train_config_yaml=(model_dir / "train_config.yaml").read_text(),
        metrics=metrics,
        text_files=text_files,
    )
    _record(name, target, home, f"benchmarks/quality.py wise {name} MODEL_DIR --home HOME", None)


STSB_GENRES = r"^(.+?)-\d{4}"


@app.command()
def groups(
    member: MEMBERS,
    home: HOME,
    split: Annotated[str, typer.Option(help="DATASET/SPLIT")] = "stsb/dev",
    pattern: Annotated[str, typer.Option(help="regex over pair ids; group 1 names the group")] = STSB_GENRES,
    label: Annotated[list[str] | None, typer.Option(help="row name per --member, in order")] = None,
) -> None:
    """Spearman (or accuracy) of each model per group of pairs of one split, e.g. STS-B dev per genre."""
    from simpair.evaluation.splits import evaluate_model

    dataset, _, split_name = split.partition("/")
    results = _load()
    table = results.setdefault("groups", {}).setdefault(split, {"pattern": pattern, "models": {}})
    table["pattern"] = pattern
    if label and len(label) != len(member):
        raise typer.BadParameter(f"{len(label)} labels for {len(member)} members", param_hint="--label")
    for model_dir, name in zip(member, label or [m.name for m in member], strict=True):
        out = home / "evaluations" / f"bench-groups-{model_dir.name}"
        m = evaluate_model(model_dir, home, [(dataset, split_name)], out_dir=out, group_pattern=pattern)
        m = m.metrics["splits"][split]
        key = "spearman" if "spearman" in m else "accuracy"
        table["models"][name] = {
            "metric": key,
            "all": m[key],
            "n": m["evaluated"],
            "by_group": {g: v[key] for g, v in m["by_group"].items()},
            "group_n": {g: v["evaluated"] for g, v in m["by_group"].items()},
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        typer.echo(f"{name}: {key} {m[key]:.4f}")
    _save(results)


@app.command()
def table() -> None:
    """Regenerate the generated blocks of docs/benchmarks.md and docs/experiments.md from the results."""
    import pages  # benchmarks/pages.py

    for page in pages.write():
        typer.echo(f"updated {page}")


@app.callback(invoke_without_command=True)
def default(ctx: typer.Context) -> None:
    """With no command (`make bench`): train and record the default configs, measure throughput, and
    rewrite the docs table, in $SIMPAIR_HOME (about an hour on 2 idle cores)."""
    if ctx.invoked_subcommand is not None:
        return
    from simpair import settings

    home = settings.home_dir()
    for name in ("msrp-cross", "stsb-bi"):
        run(name, home, None, ["num_threads=1"], None)
    for kind in ("cross", "bi"):
        throughput(home, kind=kind, pairs=320, batch_size=16, threads=1)
    table()


if __name__ == "__main__":
    app()
