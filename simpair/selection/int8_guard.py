"""The int8 parity guard behind an explicit `--precision int8`: the int8 rung of the precision ladder.

`--precision auto` reads the whole ladder's cached verdict (`precision_ladder`, stricter limits); an
explicit int8 is checked here with the dev pairs, metric and comparison of that same ladder, under
its own limits below, and its verdict kept as `simpair.int8.*` tags on the registry version.

int8 moves scores far more than bf16, and how far depends on the weights (a fine-tuned model with
sharp logits flips labels an untrained one never does), so no tolerance can be promised in advance.
Instead each model is measured: its primary metric (paraphrase F1 at its own threshold, STS Spearman)
on the dev split it was tuned on, in fp32 and in int8, plus the share of dev labels int8 flips. int8
is refused when the metric moves by more than `max_delta` or more than `max_flip_share` of the labels
flip. The dev split is the one the model records (`metrics.json` `dev_source`, `dev_pair_ids.txt`),
read from the pipeline home, never the test split, which stays for evaluation.

A registry version's result is recorded on the version as `simpair.int8.*` tags by `simpair models
int8-check`, so one measurement serves every later night and the verdict is visible in MLflow; a
scoring run only reads it (`simpair.runtime.resolve`), and a saved folder is judged by the int8 rung
of its stored precision verdict. A recorded verdict stands until the check is run again, which
re-judges the recorded figures under the limits it is given, or measures anew with `--force` (or when
the quantization mode changed).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simpair.models.int8_check import Int8Check, Int8Limits, Int8Refused, int8_graph


def dev_pairs(model_dir: Path, home: Path) -> tuple[str, Any]:
    """The precision ladder's dev pairs (`precision_ladder.dev_pairs`), refused as `Int8Refused`."""
    from simpair.selection.precision_ladder import NoDevSplit
    from simpair.selection.precision_ladder import dev_pairs as ladder_dev_pairs

    try:
        return ladder_dev_pairs(Path(model_dir), home)
    except NoDevSplit as exc:
        raise Int8Refused(str(exc).replace("its precisions", "its int8 metric")) from None


def measure(model_dir: Path, home: Path, limits: Int8Limits, threads: int = 1) -> Int8Check:
    """Score the model's dev pairs in fp32 and int8 and judge the difference under `limits`.

    The int8 rung of the precision ladder (`precision_ladder.compare`), with this guard's own limits.
    """
    from simpair.models.device import host_facts, pick_device
    from simpair.runtime.int8_backend import use_int8
    from simpair.runtime.loader import load_predictor
    from simpair.selection.precision_ladder import compare

    model_dir = Path(model_dir)
    split, frame = dev_pairs(model_dir, home)
    text_a, text_b = frame["text_a"].to_list(), frame["text_b"].to_list()
    fp32 = load_predictor(model_dir, device="cpu", precision="fp32")
    int8 = use_int8(load_predictor(model_dir, device="cpu", precision="fp32"), threads)
    c = compare(fp32, fp32.predict(text_a, text_b), int8.predict(text_a, text_b), frame)
    return Int8Check(
        metric=c.metric, metric_fp32=c.metric_fp32, metric_int8=c.metric_rung,
        label_flip_share=c.label_flip_share, pairs=len(text_a), dev_split=split, mode=_recipe(),
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        max_delta=limits.max_delta, max_flip_share=limits.max_flip_share,
        host=host_facts(pick_device("cpu")),  # int8 runs on the CPU whatever else the host has
    ).judged(limits)  # fmt: skip


def check_version(
    home: Path,
    name: str,
    version: str,
    limits: Int8Limits | None = None,
    force: bool = False,
    threads: int = 1,
) -> Int8Check:
    """The int8 check of a registry version: the one recorded on it, else measured now and recorded.

    With `limits`, a recorded measurement is re-judged under them (and the new verdict recorded);
    without, a recorded verdict is returned as it stands. `force` measures again.
    """
    from simpair.models.device import host_facts, pick_device
    from simpair.models.precision_verdict import host_differences
    from simpair.registry import registry

    c = registry.client(home)
    recorded = Int8Check.from_tags(dict(c.get_model_version(name, version).tags or {}))
    # another recipe or another host: measure (here)
    here = recorded is not None and not host_differences(recorded.host, host_facts(pick_device("cpu")))
    if recorded is not None and recorded.mode == _recipe() and here and not force:
        if limits is None or (limits.max_delta, limits.max_flip_share) == (
            recorded.max_delta,
            recorded.max_flip_share,
        ):
            return recorded
        check = recorded.judged(limits)
    else:
        try:
            local_dir = registry.download_version(c, name, version, home)
            check = measure(local_dir, home, limits or Int8Limits.from_env(), threads)
        except Int8Refused as exc:  # nothing measured: say why, record nothing (the home may change)
            raise Int8Refused(f"int8 refused for {name}/{version}: {exc}") from None
    registry.tag_version(c, name, version, check.to_tags())
    return check


def _recipe() -> str:
    """The int8 graph `use_int8` builds now: this host's per-row recipe (`int8_graph`) for the default
    mode, else the mode's name (a check measured on ONNX Runtime's dynamic graph must not pass for the
    per-row one)."""
    from simpair.runtime import int8_backend

    return int8_graph() if int8_backend.DEFAULT_MODE == "per-row" else int8_backend.DEFAULT_MODE
