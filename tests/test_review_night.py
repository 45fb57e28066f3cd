"""The review loop for real, on a small smoke night: a scoring run writes the queue, a Label Studio export
of it comes back through `simpair review import`, and the next night retrains on it and gates on it.

Real files, real MLflow, the in-process night (the same DAG the flow runs) and the tiny smoke model. MSRP
is cut to its first lines in a temporary sources folder so two nights fit in seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from simpair import settings
from simpair.catalog import Catalog
from simpair.models import ModelMetadata
from simpair.nightly.night import night_in_process
from simpair.registry import registry
from simpair.review.imports import import_reviews
from simpair.review.queue import ReviewPolicy
from simpair.review.store import queue_files
from simpair.scoring.options import ScoringOptions
from simpair.scoring.run import run_scoring
from simpair.stages import InProcess
from simpair.training.leaked_pairs import trained_pairs

pytestmark = pytest.mark.usefixtures("one_thread")


def _sources(shared: Path, root: Path) -> tuple[Path, Path]:
    """(sources, contracts): the first 300 MSRP train and 200 test lines, and the MSRP contract alone."""
    (root / "sources" / "msrp").mkdir(parents=True)
    for name, lines in (("msr_paraphrase_train.txt", 301), ("msr_paraphrase_test.txt", 201)):
        text = (shared / "msrp" / name).read_text(encoding="utf-8-sig").splitlines(keepends=True)[:lines]
        (root / "sources" / "msrp" / name).write_text("".join(text), encoding="utf-8")
    (root / "contracts").mkdir()
    shutil.copy(settings.PROJECT_ROOT / "data_contracts" / "msrp.yaml", root / "contracts")
    return root / "sources", root / "contracts"


def _profile(root: Path) -> Path:
    """The smoke profile's paraphrase task, training on its reviews and gating on the reviewed traffic."""
    profile = yaml.safe_load((settings.PROJECT_ROOT / "configs" / "nightly-smoke.yaml").read_text())
    task = profile["tasks"]["paraphrase"]
    config = yaml.safe_load((settings.PROJECT_ROOT / "configs" / "smoke-paraphrase.yaml").read_text())
    config["max_train_samples"] = None  # every training pair listed with the model (4 steps all the same)
    (root / "smoke-paraphrase.yaml").write_text(yaml.safe_dump(config))
    task["config"] = str(root / "smoke-paraphrase.yaml")
    task["reviews"] = {"train": True, "traffic_split": True, "repeat": 2}
    task["gate"]["traffic"] = "required"
    profile["tasks"] = {"paraphrase": task}
    profile["monitor"] = {"enabled": False}
    path = root / "nightly-review.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _label_studio_export(tasks: Path, out: Path) -> Path:
    """Every queued task answered once, as a Label Studio JSON export holds it (Yes for every third)."""
    exported = []
    for i, task in enumerate(json.loads(tasks.read_text())):
        choice = {"choices": ["Yes" if i % 3 == 0 else "No"]}
        result = [{"from_name": "paraphrase", "to_name": "text_a", "type": "choices", "value": choice}]
        exported.append({"id": i + 1, **task, "annotations": [{"result": result, "completed_by": 1}]})
    out.write_text(json.dumps(exported))
    return out


def test_a_reviewed_queue_is_trained_on_and_judged_on_the_next_night(
    home: Path, shared_data: Path, tmp_path: Path
) -> None:
    sources, contracts = _sources(shared_data, tmp_path)
    profile = _profile(tmp_path)
    first = night_in_process(profile=profile, home=home, sources=sources, contracts=contracts)
    assert first.status == "trained" and first.tasks[0].traffic == []  # nothing reviewed yet

    # a scoring run with the champion-to-be writes tonight's queue
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    pl.DataFrame(
        {
            "text_a": [f"The council approved plan number {i} on Monday." for i in range(90)],
            "text_b": [f"On Monday the council passed proposal {i % 45}." for i in range(90)],
        }
    ).write_parquet(inbox / "batch.parquet")
    review = ReviewPolicy(uncertain=30, random=20, disputed=0, challenger=None)
    options = ScoringOptions(model="simpair-paraphrase/1", home=home, review=review, threads=1)
    run_scoring(str(inbox), out, options, InProcess())
    (queue,) = queue_files(out)
    assert pl.read_parquet(queue)["queue"].value_counts().sort("queue").rows() == [
        ("random", 20),
        ("uncertain", 30),
    ]

    export = _label_studio_export(queue.parent / "tasks.json", tmp_path / "export.json")
    imported = import_reviews(export, home, queue=out)
    assert imported.reviews_by_queue == {"uncertain": 30, "random": 20}
    catalog = Catalog(home)
    train_ids = set(catalog.read_split("reviews", "train")["pair_id"])
    traffic_ids = set(catalog.read_split("reviews", "traffic")["pair_id"])
    assert len(train_ids) == 30 and len(traffic_ids) == 20 and not train_ids & traffic_ids

    second = night_in_process(profile=profile, home=home, sources=sources, contracts=contracts)
    assert second.status == "trained"  # only the reviews changed: new data, so the night retrains
    assert second.dataset_versions["reviews"] == imported.version
    (outcome,) = second.tasks
    model_dir = Path(outcome.model_dir or "")
    config = yaml.safe_load((model_dir / "train_config.yaml").read_text())
    assert {
        "dataset": "reviews",
        "split": "train",
        "version": None,
        "exclude_pair_ids": None,
        "repeat": 2,
    } in (config["train"])
    assert "reviews/traffic" in [f"{r['dataset']}/{r['split']}" for r in config["evaluate_on"]]
    exact, _ = trained_pairs(model_dir, ModelMetadata.read(model_dir))
    assert exact is not None
    learnt = set(exact.filter(pl.col("dataset") == "reviews").collect()["pair_id"])
    assert learnt == train_ids  # every reviewed training pair, and no reviewed traffic pair

    # the gate judged on the reviewed traffic: 20 pairs, under the minimum, so reported and not judged
    (challenger, reference) = outcome.traffic
    assert (challenger.split, challenger.n_reviewed, challenger.metric) == ("traffic", 20, "f1")
    assert challenger.low is not None and challenger.low <= challenger.value <= (challenger.high or 0)
    assert reference.model in ("champion v1", "zero-shot")
    c = registry.client(home)
    tags = c.get_model_version("simpair-paraphrase", outcome.version).tags
    assert tags["gate.traffic.split"] == "reviews/traffic" and tags["gate.traffic.result"] == "reported"
    assert "reported, not judged: fewer than 50 reviewed pairs" in (outcome.gate_report or "")
    assert "Accuracy on your traffic (reviews/traffic" in (outcome.gate_report or "")
