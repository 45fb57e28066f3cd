"""Does fine-tuning transfer? A model beside its untrained backbone, in its domain and off it.

In-domain test figures say what fine-tuning bought on the training distribution; they cannot say what
it gave back elsewhere. Here the model and the zero-shot backbone (the gate's baseline: the same
backbone, mean pooling, cosine) are scored on the same pairs of
- the test splits of the datasets the model trained on (in-domain), and
- the other task's test split (cross-task): an STS model's ROC-AUC on MSRP test, a paraphrase model's
  Spearman on STS-B test, both threshold-free,
with pairs the model trained on, or that sit in any train-role split, excluded for both (the gate's
exclusion rule). A model below the backbone off its domain has traded generality for its home domain.

The report also shows the model's WiSE-FT path (`simpair.selection.wise_path`): dev and choice-canary
figures at each alpha between the backbone and the fine-tune, as a table and `wise_path.png`. A model
the night chose an alpha for carries the path it was chosen from; for any other, the path is walked
here with the shipped nightly profile's grid and canaries for the model's task (STS model: MSRP train
pairs and the STS-B dev pairs of groups train lacks; paraphrase: STS-B dev), those ingested in the home.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from simpair import settings
from simpair.catalog import Catalog
from simpair.evaluation.splits import default_eval_splits
from simpair.evaluation.zero_shot_baseline import zero_shot_model
from simpair.models import ModelMetadata
from simpair.registry import tracking
from simpair.selection.gate import DEFAULT_PRIMARY, wise_ft_markdown
from simpair.selection.promotion import canary_exclusions, evaluate, wise_ft_record
from simpair.selection.wise_rule import ChoiceCanary, WiseFtPolicy

CROSS_TASK = {"sts": ("msrp", "test"), "paraphrase": ("stsb", "test")}
# What each kind of split is read with when it is the other task's: threshold-free figures only.
CROSS_METRIC = {"sts": "roc_auc", "paraphrase": "spearman"}
# A task whose shipped nightly profile walks no WiSE-FT path is walked on this split (never trained on,
# never a test split); one that does is walked with the profile's own policy.
CHOICE_CANARY = {"sts": ("msrp", "train"), "paraphrase": ("stsb", "dev")}
NIGHTLY_PROFILE = "configs/nightly.yaml"


@dataclass
class TransferRow:
    split: str
    kind: str  # "in-domain" | "cross-task"
    metric: str
    model: float
    zero_shot: float
    pairs: int

    @property
    def delta(self) -> float:
        return self.model - self.zero_shot


@dataclass
class TransferReport:
    model_dir: str
    backbone: str
    rows: list[TransferRow] = field(default_factory=list)
    out_dir: str = ""
    wise_ft: dict | None = None  # the WiSE-FT path record (`simpair.selection.wise_path.walk_path`)
    wise_ft_note: str = ""  # why there is no path, when there is none

    def to_markdown(self) -> str:
        lines = [
            f"### Transfer: {Path(self.model_dir).name} against its untrained backbone ({self.backbone})",
            "",
            "| split | kind | metric | model | zero-shot | delta | pairs |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r.split} | {r.kind} | {r.metric} | {r.model:.4f} | {r.zero_shot:.4f} | {r.delta:+.4f} "
            f"| {r.pairs} |"
            for r in self.rows
        ]
        if self.wise_ft:
            lines += ["", "#### WiSE-FT path (dev and choice canaries; `wise_path.png`)", ""]
            lines.append(wise_ft_markdown(self.wise_ft).rstrip("\n"))
        elif self.wise_ft_note:
            lines += ["", f"No WiSE-FT path: {self.wise_ft_note}"]
        return "\n".join(lines) + "\n"


def transfer_sets(home: Path, meta: ModelMetadata) -> list[tuple[str, str, str]]:
    """(dataset, split, kind): in-domain test splits, then the other task's test split if ingested.

    The other task's split is cross-task even when the model saw its dataset (e.g. a paraphrase model
    with an intermediate stage on STS-B): it is still read with the other task's labels.
    """
    cross = CROSS_TASK[meta.task]
    sets = [(d, s, "in-domain") for d, s in default_eval_splits(home, meta) if (d, s) != cross]
    catalog = Catalog(home)
    if cross[0] in catalog.datasets() and cross[1] in catalog.splits(cross[0]):
        sets.append((*cross, "cross-task"))
    return sets


def transfer_report(
    model_dir: str | Path, home: str | Path, out_dir: str | Path | None = None, wise_path: bool = True
) -> TransferReport:
    """Score the model and its zero-shot backbone on the same pairs; writes transfer.json and .md
    (with `wise_path`, also the model's WiSE-FT path: walked now when the model carries none)."""
    model_dir, home = Path(model_dir), Path(home)
    meta = ModelMetadata.read(model_dir)
    sets = transfer_sets(home, meta)
    if not sets:
        raise ValueError(f"{model_dir}: no ingested test split to evaluate on; run `simpair ingest`")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(out_dir) if out_dir else home / "evaluations" / f"transfer-{model_dir.name}-{stamp}"
    pairs = [(d, s) for d, s, _ in sets]
    excluded = canary_exclusions(home, pairs, model_dir)
    zs_dir = zero_shot_model(meta.backbone, meta.task, home, threshold_dataset=pairs[0][0])
    mine = evaluate(model_dir, home, pairs, excluded, out / "model").metrics
    base = evaluate(zs_dir, home, pairs, excluded, out / "zero-shot").metrics
    report = TransferReport(model_dir=str(model_dir), backbone=meta.backbone, out_dir=str(out))
    for dataset, split, kind in sets:
        label = f"{dataset}/{split}"
        metric = DEFAULT_PRIMARY[meta.task] if kind == "in-domain" else CROSS_METRIC[meta.task]
        if kind == "in-domain" and f"{label}/{metric}" not in mine:  # e.g. a graded split of a binary set
            metric = "spearman" if f"{label}/spearman" in mine else "roc_auc"
        report.rows.append(
            TransferRow(
                split=label,
                kind=kind,
                metric=metric,
                model=mine[f"{label}/{metric}"],
                zero_shot=base[f"{label}/{metric}"],
                pairs=int(mine[f"{label}/evaluated"]),
            )
        )
    out.mkdir(parents=True, exist_ok=True)
    if wise_path:
        report.wise_ft, report.wise_ft_note = wise_path_of(model_dir, home)
    if report.wise_ft:
        from simpair.selection.wise_path import path_png

        path_png(report.wise_ft, out / "wise_path.png")
    rows = [asdict(r) | {"delta": r.delta} for r in report.rows]
    (out / "transfer.json").write_text(json.dumps({**asdict(report), "rows": rows}, indent=2) + "\n")
    (out / "transfer.md").write_text(report.to_markdown())
    return report


def wise_path_of(model_dir: Path, home: Path) -> tuple[dict | None, str]:
    """(record, note): the path the night chose this model from, else one walked now with the default
    grid and the task's choice canary (when ingested); None and the reason when it cannot be walked."""
    record = wise_ft_record(model_dir)
    if record:
        return record, ""
    from simpair.selection.wise_path import walk_path

    policy = shipped_policy(ModelMetadata.read(model_dir).task, home)
    try:
        return walk_path(model_dir, home, policy)[1], ""
    except ValueError as exc:  # a stack, a model with no recorded dev split, a canary it trained on
        return None, str(exc)


def shipped_policy(task: str, home: Path) -> WiseFtPolicy:
    """The shipped nightly profile's WiSE-FT policy for `task` (its grid and canaries), else the task's
    one choice canary; only canaries whose split is ingested in `home` are kept."""
    import yaml

    profile = yaml.safe_load(settings.shipped_path(NIGHTLY_PROFILE).read_text()) or {}
    spec = ((profile.get("tasks") or {}).get(task) or {}).get("wise_ft")
    dataset, split = CHOICE_CANARY[task]
    policy = (
        WiseFtPolicy.model_validate(spec)
        if spec
        else WiseFtPolicy(canaries=[ChoiceCanary(dataset=dataset, split=split)])
    )
    catalog = Catalog(home)
    ingested = [
        c for c in policy.canaries if c.dataset in catalog.datasets() and c.split in catalog.splits(c.dataset)
    ]
    return policy.model_copy(update={"canaries": ingested})


def log_transfer(report: TransferReport, home: Path) -> str:
    """Record the figures as an MLflow run (stage `transfer`) beside the model's training runs."""
    import mlflow

    experiment_id = tracking.ensure_experiment(Path(home))
    name = Path(report.model_dir).name
    tags = tracking.run_tags(None, {"simpair.stage": "transfer", "simpair.model_dir": report.model_dir})
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"transfer-{name}", tags=tags) as run:
        for r in report.rows:
            key = f"transfer/{r.split}/{r.metric}"
            mlflow.log_metrics(
                {f"{key}/model": r.model, f"{key}/zero_shot": r.zero_shot, f"{key}/delta": r.delta}
            )
        mlflow.log_text(report.to_markdown(), "transfer.md")
        png = Path(report.out_dir) / "wise_path.png"
        if report.wise_ft and png.is_file():
            mlflow.log_artifact(str(png))
        return run.info.run_id
