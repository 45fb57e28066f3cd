"""The WiSE-FT path a night registers from: each alpha's dev and choice-canary figures, and the rule's pick.

WiSE-FT (Wortsman et al. 2022, "Robust fine-tuning of zero-shot models") interpolates the encoder
between its pre-trained and fine-tuned weights, w0 + alpha * (w - w0). Fine-tuning buys the training
domain and may give back what the backbone knew elsewhere; a smaller alpha gives back less. The night
walks an alpha grid and keeps

    the largest alpha whose every choice canary is at or above the untrained backbone minus
    `canary_margin`, with dev within `dev_tolerance` of the best alpha's dev

(if no alpha keeps every canary, the dev-eligible alpha whose worst canary is closest to the backbone;
the gate's own canaries then judge it). Choice canaries are splits the model never trained on and
that are not test splits: the choice tunes alpha, so no test pair may steer it. Pairs whose texts
sit in any train-role split, or that the model trained on, are dropped first (the gate's exclusion
rule). Heads the backbone never had (a cross-encoder's classifier) keep their trained weights.
Texts are tokenized once per split; each alpha then costs one forward pass over dev and canaries.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import torch

from simpair.catalog import Catalog
from simpair.ensemble.fit import dev_split_of, shared_dev_frame
from simpair.ensemble.soup import fit_on_dev
from simpair.metrics.threshold_free import rank_figure
from simpair.models import ModelMetadata, Predictor, build_model, save_model
from simpair.models.inference import first_output, forward_sorted, normalized
from simpair.pairs import sorted_texts
from simpair.runtime.loader import load_predictor
from simpair.selection.wise_rule import DEV_METRIC, RULE, ChoiceCanary, PathPoint, WiseFtPolicy, choose_alpha
from simpair.stages import step
from simpair.training.averaging import interpolate


class _Pairs:
    """Pairs tokenized once for one model kind; `raw(model)` is one forward pass (logits or cosines)."""

    def __init__(self, predictor: Predictor, a: list[str], b: list[str]) -> None:
        self.kind, self.pad = predictor.kind, predictor.tokenizer.pad_token_id or 0
        tok, length = predictor.tokenizer, predictor.max_length
        if self.kind == "cross":
            orders = [(a, b), (b, a)] if predictor.meta.symmetric else [(a, b)]
            self.inputs = [tok(x, y, truncation=True, max_length=length) for x, y in orders]
            return
        index: dict[str, int] = {}
        for text in a + b:
            index.setdefault(text, len(index))
        self.inputs = [tok(list(index), truncation=True, max_length=length)]
        self.ia = np.fromiter((index[t] for t in a), dtype=np.int64, count=len(a))
        self.ib = np.fromiter((index[t] for t in b), dtype=np.int64, count=len(b))

    def raw(self, predictor: Predictor) -> np.ndarray:
        outs = [
            forward_sorted(
                predictor.model,
                [(enc["input_ids"], enc.get("token_type_ids"))],
                self.pad,
                predictor.device,
                None,
                combine=normalized if self.kind == "bi" else first_output,
            )
            for enc in self.inputs
        ]
        if self.kind == "cross":
            return np.mean(outs, axis=0).astype(np.float32)
        emb = outs[0]
        return np.einsum("ij,ij->i", emb[self.ia], emb[self.ib]).astype(np.float32)


def _texts(frame: pl.DataFrame) -> tuple[list[str], list[str]]:
    return frame["text_a"].to_list(), frame["text_b"].to_list()


def _figure(raw: np.ndarray, frame: pl.DataFrame, binary: bool) -> float:
    """Threshold-free: ROC-AUC on 0/1 labels, Spearman on graded scores (rank figures of raw outputs)."""
    return rank_figure(raw, frame["label" if binary else "score"].to_numpy(), binary)


def _is_test(catalog: Catalog, dataset: str, split: str) -> bool:
    return catalog.splits(dataset).get(split) == "test"


def trained_groups(home: Path, model_dir: Path, pattern: str) -> set[str]:
    """Groups (first capture group of `pattern` over pair ids) of the pairs the model trained on: its
    `train_pairs.txt` where it has one (exact, after `exclude_pair_ids`), else its training splits whole."""
    from simpair.metrics.groups import UNMATCHED, compile_group_pattern, pair_groups
    from simpair.training.leaked_pairs import trained_pairs

    meta = ModelMetadata.read(model_dir)
    scan, splits = trained_pairs(model_dir, meta)
    if scan is not None:
        ids = scan.select("pair_id").unique().collect()["pair_id"].to_list()
    else:
        catalog = Catalog(home)
        ids = [i for label in sorted(splits) for i in catalog.read_split(*label.split("/", 1))["pair_id"]]
    return set(pair_groups(ids, compile_group_pattern(pattern)).tolist()) - {UNMATCHED}


# Fewer dev pairs of trained groups than this (or than a quarter of dev) and a dev-split canary is
# skipped: a Spearman or a threshold fitted on a handful of pairs would pick alpha by chance.
MIN_DEV_CRITERION = 10


class NoUnseenGroup(ValueError):
    """The data holds no pair of an unseen group: the canary is skipped for this walk, with its reason
    recorded, so a night on data without such groups (a user's own pair ids, a small sample) still runs."""


def _unseen_group_mask(
    home: Path, model_dir: Path, canary: ChoiceCanary, pair_ids: list[str]
) -> tuple[np.ndarray, list[str]]:
    """(mask of pairs whose group the model never trained on, those groups); errors name the field."""
    from simpair.metrics.groups import UNMATCHED, compile_group_pattern, pair_groups

    assert canary.unseen_groups is not None
    where = f"wise_ft canary {canary.split_label}: unseen_groups '{canary.unseen_groups}'"
    groups = pair_groups(pair_ids, compile_group_pattern(canary.unseen_groups))
    named = set(groups.tolist()) - {UNMATCHED}
    if not named:
        raise NoUnseenGroup(f"{where} matches none of the split's {len(pair_ids)} pair ids")
    seen = trained_groups(home, model_dir, canary.unseen_groups)
    unseen = sorted(named - seen)
    if not unseen:
        raise NoUnseenGroup(
            f"{where}: {model_dir.name} trained on every group of the split ({', '.join(sorted(named))}); "
            "there is no unseen group to check"
        )
    return np.isin(groups, unseen), unseen


class CanaryPairs(NamedTuple):
    """A choice canary's pairs, whether they carry 0/1 labels, how many were dropped, unseen groups kept."""

    frame: pl.DataFrame
    binary: bool
    excluded: int
    groups: list[str]


def canary_frame(home: Path, model_dir: Path, canary: ChoiceCanary, seed: int = 0) -> CanaryPairs:
    """The canary's pairs minus any whose texts sit in a train-role split or that the model trained on,
    only those of unseen groups (`unseen_groups`), sampled to `max_pairs`. Refuses test splits and
    splits trained on."""
    from simpair.selection.promotion import canary_exclusions

    catalog = Catalog(home)
    meta = ModelMetadata.read(model_dir)
    label = canary.split_label
    if canary.split not in catalog.splits(canary.dataset):
        raise ValueError(f"wise_ft canary {label}: no such ingested split (run `simpair ingest`)")
    if _is_test(catalog, canary.dataset, canary.split):
        raise ValueError(f"wise_ft canary {label} is a test split: choosing alpha never reads test pairs")
    if label in meta.train_datasets:
        raise ValueError(f"wise_ft canary {label}: {model_dir.name} trained on it; pick a split it never saw")
    frame = catalog.read_split(canary.dataset, canary.split)
    total = frame.height
    groups: list[str] = []
    if canary.unseen_groups is not None:
        mask, groups = _unseen_group_mask(home, model_dir, canary, frame["pair_id"].to_list())
        frame = frame.filter(pl.Series(mask))
    seen = [
        catalog.read_split(d, s).select(*sorted_texts("text_a", "text_b"))
        for d in catalog.datasets()
        for s, role in catalog.splits(d).items()
        if role == "train" and (d, s) != (canary.dataset, canary.split)
    ]
    if seen:
        keys = pl.concat(seen).unique()
        frame = frame.with_columns(*sorted_texts("text_a", "text_b")).join(keys, on=["lo", "hi"], how="anti")
    dropped = canary_exclusions(home, [(canary.dataset, canary.split)], model_dir)[label]
    frame = frame.filter(~pl.col("pair_id").is_in(list(dropped)))
    binary = frame.height > 0 and frame["label"].null_count() == 0
    column = "label" if binary else "score"
    frame = frame.filter(pl.col(column).is_not_null()).sort("pair_id")
    excluded = total - frame.height
    if canary.max_pairs is not None and frame.height > canary.max_pairs:
        frame = frame.sample(n=canary.max_pairs, seed=seed).sort("pair_id")
    if frame.is_empty():
        raise ValueError(f"wise_ft canary {canary.label}: no pair left after dropping {excluded}")
    return CanaryPairs(frame, binary, excluded, groups)


def dev_criterion(
    dev_source: str, dev: pl.DataFrame, canaries: list[tuple[ChoiceCanary, CanaryPairs]]
) -> tuple[pl.DataFrame, list[str]]:
    """The dev pairs the rule compares alphas on: the model's dev split minus the unseen groups of any
    canary drawn from that same split, so no pair counts both as dev and as a canary."""
    from simpair.metrics.groups import compile_group_pattern, pair_groups

    dropped: list[str] = []
    keep = np.ones(dev.height, dtype=bool)
    for spec, pairs in canaries:
        if spec.unseen_groups is None or (spec.dataset, spec.split) != dev_split_of(dev_source):
            continue
        groups = pair_groups(dev["pair_id"].to_list(), compile_group_pattern(spec.unseen_groups))
        mask = np.isin(groups, pairs.groups)
        keep &= ~mask
        dropped += [g for g in pairs.groups if g not in dropped and g in set(groups[mask].tolist())]
    if dropped and keep.sum() < max(MIN_DEV_CRITERION, dev.height / 4):
        raise NoUnseenGroup(
            f"only {int(keep.sum())} of dev {dev_source}'s {dev.height} pairs are of groups the model "
            f"trained on (the rest: {', '.join(dropped)}); alpha would be decided on too few pairs"
        )
    return dev.filter(pl.Series(keep)), dropped


def _backbone_start(meta: ModelMetadata, model_dir: Path) -> dict[str, torch.Tensor]:
    """The encoder's pre-trained weights (the tiny test backbone: its seeded random init)."""
    from simpair.models.tiny import build_tiny
    from simpair.models.zero_shot import TINY_NAMES
    from simpair.training.config import train_seed

    if meta.backbone in TINY_NAMES:
        model, _ = build_tiny(meta.kind, seed=train_seed(model_dir), cross_head=meta.cross_head)
    else:
        model = build_model(meta.kind, meta.backbone, meta.cross_head)
    return {k: v.detach().clone() for k, v in model.encoder.state_dict().items()}


class _ChoiceSets(NamedTuple):
    """What the walk reads: the model's dev split, the part of it the rule compares alphas on, and the
    choice canaries that could be drawn (with why each other one was skipped)."""

    source: str  # the dev split as shared_dev_frame names it
    label: str  # dataset/split
    dev: pl.DataFrame
    criterion: pl.DataFrame
    dropped_groups: list[str]
    specs: list[tuple[ChoiceCanary, CanaryPairs]]
    skipped: dict[str, str]


def _read_choice_sets(model_dir: Path, home: Path, policy: WiseFtPolicy) -> _ChoiceSets:
    """Read dev and draw each choice canary; a canary without unseen pairs is skipped with its reason."""
    dev_source, dev = shared_dev_frame([model_dir], home)
    dev_label = "/".join(dev_split_of(dev_source))
    skipped: dict[str, str] = {}
    canaries: list[CanaryPairs] = []
    for spec in policy.canaries:
        try:
            canaries.append(canary_frame(home, model_dir, spec, policy.seed))
        except NoUnseenGroup as exc:
            skipped[spec.label] = str(exc)
    used = [spec for spec in policy.canaries if spec.label not in skipped]
    specs = list(zip(used, canaries, strict=True))
    try:
        criterion, dropped_groups = dev_criterion(dev_source, dev, specs)
    except NoUnseenGroup as exc:  # too few trained-group dev pairs (ids naming the split): skip dev canaries
        dev_canaries = {
            spec.label for spec, _ in specs if spec.unseen_groups and spec.split_label == dev_label
        }
        skipped.update({label: str(exc) for label in dev_canaries})
        specs = [(spec, c) for spec, c in specs if spec.label not in dev_canaries]
        criterion, dropped_groups = dev, []
    return _ChoiceSets(dev_source, dev_label, dev, criterion, dropped_groups, specs, skipped)


class _Tokenized(NamedTuple):
    """Dev and canary pairs tokenized once, so each alpha costs one forward pass over them."""

    dev: _Pairs
    on_dev: list[np.ndarray | None]  # a canary's rows in dev when it is a subset of dev, else None
    canaries: list[_Pairs | None]  # None where the canary reuses dev's forward pass
    keys: list[str]  # "<canary label>/<roc_auc|spearman>"


def _tokenize_choice_sets(predictor: Predictor, sets: _ChoiceSets) -> _Tokenized:
    dev_pairs = _Pairs(predictor, *_texts(sets.dev))
    # a canary drawn from the dev split reuses dev's forward pass: its pairs are a subset of dev's
    row_of = {pid: i for i, pid in enumerate(sets.dev["pair_id"].to_list())}
    on_dev = [
        np.asarray([row_of[p] for p in c.frame["pair_id"]], dtype=np.int64)
        if spec.split_label == sets.label and set(c.frame["pair_id"]) <= row_of.keys()
        else None
        for spec, c in sets.specs
    ]
    canary_pairs = [None if rows is not None else _Pairs(predictor, *_texts(c.frame))
                    for (_, c), rows in zip(sets.specs, on_dev, strict=True)]  # fmt: skip
    keys = [f"{spec.label}/{'roc_auc' if c.binary else 'spearman'}" for spec, c in sets.specs]
    return _Tokenized(dev_pairs, on_dev, canary_pairs, keys)


def _backbone_figures(
    meta: ModelMetadata, model_dir: Path, home: Path, sets: _ChoiceSets, keys: list[str]
) -> dict[str, float]:
    """The untrained backbone's figure on each choice canary: the bar the rule holds every alpha to."""
    from simpair.evaluation.zero_shot_baseline import zero_shot_model
    from simpair.training.config import train_seed

    zero = load_predictor(zero_shot_model(meta.backbone, meta.task, home, seed=train_seed(model_dir)))
    return {
        key: _figure(_Pairs(zero, *_texts(c.frame)).raw(zero), c.frame, c.binary)
        for key, (_, c) in zip(keys, sets.specs, strict=True)
    }


def _score_alphas(
    predictor: Predictor,
    meta: ModelMetadata,
    policy: WiseFtPolicy,
    weights: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]],
    sets: _ChoiceSets,
    tokens: _Tokenized,
    gold: np.ndarray,
) -> list[PathPoint]:
    """Load each alpha of the grid (`weights`: start, tuned); measure dev (its criterion) and canaries."""
    metric = DEV_METRIC[meta.task]
    in_criterion = sets.dev["pair_id"].is_in(sets.criterion["pair_id"].implode()).to_numpy()
    canaries = [c for _, c in sets.specs]
    path: list[PathPoint] = []
    for alpha in policy.grid():
        predictor.model.encoder.load_state_dict(interpolate(*weights, alpha))
        dev_raw = tokens.dev.raw(predictor)
        _, dev_metrics = fit_on_dev(meta, dev_raw[in_criterion], gold[in_criterion])
        figures = {
            key: _figure(dev_raw[rows] if rows is not None else pairs.raw(predictor), c.frame, c.binary)
            for key, pairs, rows, c in zip(tokens.keys, tokens.canaries, tokens.on_dev, canaries, strict=True)
        }
        path.append(PathPoint(alpha, float(dev_metrics[metric]), figures))
    return path


def _path_record(
    model_dir: Path,
    meta: ModelMetadata,
    policy: WiseFtPolicy,
    sets: _ChoiceSets,
    choice: tuple[float, str],
    dev_metrics: dict[str, Any],
    backbone: dict[str, float],
    path: list[PathPoint],
) -> dict[str, Any]:
    """The walk as the model's metrics.json, its registry version and the gate report show it."""
    alpha, why = choice
    specs, criterion = sets.specs, sets.criterion
    kept = f" without the groups {', '.join(sets.dropped_groups)}" if sets.dropped_groups else ""
    return {
        "alpha": alpha,
        "rule": RULE,
        "reason": why,
        "policy": policy.model_dump(mode="json"),
        "from_model": model_dir.name,
        "dev_metric": DEV_METRIC[meta.task],
        "dev_source": sets.source,
        "dev_pairs": criterion.height,
        **(
            {"dev_criterion": f"{sets.source}{kept} ({criterion.height} of {sets.dev.height} pairs)"}
            if kept
            else {}
        ),
        "dev": dev_metrics,
        "backbone": backbone,
        "canary_pairs": {s.label: c.frame.height for s, c in specs},
        "canary_excluded": {s.label: c.excluded for s, c in specs},
        "canary_groups": {s.label: c.groups for s, c in specs if c.groups},
        "canary_skipped": sets.skipped,
        "by_alpha": {f"{p.alpha:g}": {"dev": p.dev, **p.canaries} for p in path},
        "splits_read": sorted({sets.label, *(c.split_label for c in policy.canaries)}),
    }


def walk_path(model_dir: Path, home: Path, policy: WiseFtPolicy) -> tuple[Predictor, dict[str, Any]]:
    """Score every alpha of the grid on dev and the choice canaries, and apply the rule.

    Returns the predictor holding the chosen interpolation (threshold / calibration refitted on dev)
    and the record that goes into the model's metrics.json, its registry version and the gate report.
    """
    started = time.perf_counter()
    model_dir, home = Path(model_dir), Path(home)
    meta = ModelMetadata.read(model_dir)
    if meta.kind not in ("cross", "bi"):
        raise ValueError(f"{model_dir}: WiSE-FT interpolates one encoder; a {meta.kind} model has several")
    if meta.embedding_postprocess:
        raise ValueError(f"{model_dir}: embedding post-processing would need refitting at every alpha")
    sets = _read_choice_sets(model_dir, home, policy)
    gold = (sets.dev["score"] if meta.task == "sts" else sets.dev["label"]).to_numpy()

    predictor = load_predictor(model_dir)
    tokens = _tokenize_choice_sets(predictor, sets)
    backbone = _backbone_figures(meta, model_dir, home, sets, tokens.keys)

    tuned = {k: v.detach().clone() for k, v in predictor.model.encoder.state_dict().items()}
    start = {k: v.to(predictor.device) for k, v in _backbone_start(meta, model_dir).items()}
    path = _score_alphas(predictor, meta, policy, (start, tuned), sets, tokens, gold)
    alpha, why = choose_alpha(path, backbone, policy)
    why += "".join(f"; canary {label} skipped: {reason}" for label, reason in sets.skipped.items())
    predictor.model.encoder.load_state_dict(interpolate(start, tuned, alpha))
    # the chosen model's threshold / calibration is refitted on its whole dev split, as training fitted it
    chosen_meta, dev_metrics = fit_on_dev(meta, tokens.dev.raw(predictor), gold)
    predictor.meta = chosen_meta
    record = _path_record(model_dir, meta, policy, sets, (alpha, why), dev_metrics, backbone, path)
    record["seconds"] = time.perf_counter() - started
    return predictor, record


@step("wise-ft", tags=("gpu",), retries=1, retry_delay_seconds=10, profile_retries=True)
def apply_wise_ft(model_dir: str | Path, home: str | Path, policy: WiseFtPolicy) -> Path:
    """Walk the path, save the chosen interpolation beside the model as `<name>-wiseft` (safetensors,
    its record under `wise_ft` in metrics.json); returns that directory."""
    model_dir = Path(model_dir)
    predictor, record = walk_path(model_dir, Path(home), policy)
    meta = predictor.meta
    metrics_file = model_dir / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.is_file() else {}
    metrics["dev_before_wise_ft"] = metrics.get("dev", {})
    metrics["dev"] = record["dev"]
    metrics["wise_ft"] = record
    names = [meta.dev_pair_ids_file, meta.train_pairs_file, "dev_pair_ids.txt", "train_pairs.txt"]
    kept = [n for n in dict.fromkeys(names) if n and (model_dir / n).is_file()]
    text_files = {n: (model_dir / n).read_text() for n in kept}
    config = model_dir / "train_config.yaml"
    meta.created_at = None
    target = model_dir.with_name(f"{model_dir.name}-wiseft")
    return save_model(
        predictor.model.cpu(),
        predictor.tokenizer,
        target,
        meta,
        train_config_yaml=config.read_text() if config.is_file() else None,
        metrics=metrics,
        text_files=text_files,
    )


def path_png(record: dict[str, Any], path: Path) -> Path:
    """Dev and every canary against alpha, each canary's backbone figure as a dashed line."""
    import matplotlib.pyplot as plt

    from simpair.evaluation import plots  # noqa: F401  (selects the Agg backend)

    rows = sorted(record["by_alpha"].items(), key=lambda kv: float(kv[0]))
    alphas = [float(a) for a, _ in rows]
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    ax.plot(alphas, [r["dev"] for _, r in rows], marker="o", label=f"dev {record['dev_metric']}")
    for i, key in enumerate(record["backbone"]):
        line = ax.plot(alphas, [r[key] for _, r in rows], marker="s", label=key)[0]
        ax.axhline(record["backbone"][key], linestyle="--", color=line.get_color(), linewidth=1,
                   label=f"{key} backbone" if i == 0 else None)  # fmt: skip
    ax.axvline(record["alpha"], color="grey", linewidth=1)
    ax.set_xlabel("alpha (0: pre-trained encoder, 1: fine-tuned)")
    ax.set_title(f"WiSE-FT path: {record['from_model']}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
