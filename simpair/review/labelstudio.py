"""Label Studio's formats: the task import JSON a queue is written as, and reading an export back.

No `label-studio-sdk`: it pulls OpenCV, NLTK, lxml, Faker and a code generator (label-studio-sdk 2.1.2
resolved 27 packages on 2026-11-29) to write and read plain JSON. The formats are Label Studio's
documented ones (https://labelstud.io/guide/task_format):

- import: a JSON list of tasks, each `{"data": {...}}`; the labelling configs in
  `infra/label-studio/` show `$text_a` and `$text_b`. `pair_id` and `queue` ride in `data` too, because
  an export returns `data` unchanged, which is how an import finds the queued pair again.
- export ("JSON"): the same tasks with `annotations`, each with `result` (a list of regions:
  `{"type": "choices", "value": {"choices": ["Yes"]}}`, `{"type": "number", "value": {"number": 3}}`
  or `{"type": "rating", "value": {"rating": 4}}`), `was_cancelled` (skipped), `completed_by`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from simpair.atomic import atomic_write_text

# The `data` keys of a task, matching `$text_a`/`$text_b` in the shipped labelling configs.
DATA_KEYS = ("pair_id", "text_a", "text_b", "queue", "score", "model", "version", "run_id")


def queue_tasks(queue: pl.DataFrame) -> list[dict[str, Any]]:
    """One Label Studio task per queued pair, in queue order.

    The model's score travels in `data` for later analysis but the configs never show it: a reviewer
    who sees the model's opinion agrees with it more often, which would bias the random queue's
    estimate of accuracy. For the same reason no `predictions` (pre-annotations) are written.
    """
    rows = queue.select([c for c in DATA_KEYS if c in queue.columns]).to_dicts()
    return [{"data": {k: v for k, v in row.items() if v is not None}} for row in rows]


def write_tasks(queue: pl.DataFrame, path: Path) -> Path:
    """The queue as a Label Studio task import file (a JSON list), written atomically."""
    atomic_write_text(path, json.dumps(queue_tasks(queue), ensure_ascii=False, indent=1) + "\n")
    return path


@dataclass(frozen=True)
class Annotation:
    """One reviewer's answer to one task, as read from an export (label None: no usable answer)."""

    task: int  # position of the task in the export, from 1
    annotation: int  # position of the annotation in its task, from 1 (0: the task has none)
    data: dict[str, Any]
    reviewer: str | None
    value: str | float | None  # a choice's text, or a number or rating
    problem: str | None = None  # why this entry gives no review (reason for quarantine)
    raw: str = ""


def _reviewer(annotation: dict[str, Any]) -> str | None:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    return None if who is None else str(who)


def _answer(result: list[Any]) -> str | float | None:
    """The first choice, number or rating of an annotation's regions."""
    for region in result:
        if not isinstance(region, dict):
            continue
        value = region.get("value") or {}
        if isinstance(value.get("choices"), list) and value["choices"]:
            return str(value["choices"][0])
        for key in ("number", "rating"):
            if isinstance(value.get(key), int | float) and not isinstance(value.get(key), bool):
                return float(value[key])
    return None


def read_export(path: Path) -> list[Annotation]:
    """Every annotation of a Label Studio JSON export, one entry each (a task with none gives one entry).

    Raises ValueError naming the file when it is not a JSON list of tasks.
    """
    try:
        tasks = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable Label Studio JSON export: {exc}") from exc
    if not isinstance(tasks, list):
        raise ValueError(f"{path}: a Label Studio JSON export is a list of tasks, got {type(tasks).__name__}")
    out: list[Annotation] = []
    for t, task in enumerate(tasks, start=1):
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            out.append(Annotation(t, 0, {}, None, None, "not_a_task", json.dumps(task)[:2000]))
            continue
        data = task["data"]
        annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict)]
        if not annotations:
            out.append(Annotation(t, 0, data, None, None, "not_reviewed", json.dumps(task)[:2000]))
            continue
        for a, annotation in enumerate(annotations, start=1):
            raw = json.dumps({"data": data, "annotation": annotation})[:2000]
            if annotation.get("was_cancelled"):
                out.append(Annotation(t, a, data, _reviewer(annotation), None, "skipped_by_reviewer", raw))
                continue
            value = _answer(annotation.get("result") or [])
            problem = None if value is not None else "no_answer"
            out.append(Annotation(t, a, data, _reviewer(annotation), value, problem, raw))
    return out
