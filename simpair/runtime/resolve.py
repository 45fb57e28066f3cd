"""The one place a run's precision is decided: once, by the process that starts the run, from stored verdicts.

`auto` (the default) takes the fastest accepted rung of the pinned model's stored precision verdict
(`precision_verdict.json` beside its metadata, written when the version was registered or imported, or
by `simpair models verdict`); a model without one scores at fp32 and the run says so in one line. An
explicit `bf16` falls back to fp32 where it is not native; an explicit `int8` needs a stored int8
check that accepted it (the version's `simpair.int8.*` tags, or the verdict's int8 rung).

A verdict holds for the host it was measured on: it records that host's CPU flags and runtime versions
(`simpair.models.device.host_facts`), and where this host's differ, `auto` scores at fp32 and an
explicit int8 is refused, each with one line naming the difference and the command that measures
here. A verdict that records no host (written before 2026-11-29) is taken to hold everywhere. A
version's int8 check records its host the same way, and is held to it the same way.

Nothing is measured here: a scoring run never loads the dev split, exports a graph to time it, or
writes a registry tag before its first batch. Measuring is `simpair.selection`'s job. The result goes
to every chunk and worker, so one run never mixes precisions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simpair.models.int8_check import Int8Check, Int8Refused, int8_graph
from simpair.models.precision_verdict import PrecisionVerdict, host_differences, int8_graph_note
from simpair.runtime.model_ref import ModelRef
from simpair.runtime.options import ForwardPin
from simpair.runtime.precision import allowed_rungs, check_precision, runnable_precision, warn_fallback


def _measure_hint(model: ModelRef) -> str:
    return f"simpair models verdict {model.local_dir if model.version.startswith('local-') else model.label}"


def _no_verdict(model: ModelRef) -> str:
    """Why a model has no verdict, from its own files only (nothing measured, no dev split read)."""
    import json

    from simpair.models.metadata import ModelMetadata

    model_dir = Path(model.local_dir)
    metrics_file = model_dir / "metrics.json"
    try:
        has_dev = (
            bool(json.loads(metrics_file.read_text()).get("dev_source")) if metrics_file.is_file() else False
        )
    except (OSError, ValueError, AttributeError):
        has_dev = False
    if not has_dev:
        imported = ModelMetadata.read(model_dir).imported is not None
        return "no precision verdict: " + (
            "imported without a dev file" if imported else "it records no dev split"
        )
    return f"no stored precision verdict; measure one with `{_measure_hint(model)}`"


def _other_host(verdict: PrecisionVerdict, model: ModelRef, device: Any) -> str | None:
    """'verdict measured on another host: onnxruntime 1.31.0 here 1.32.0; measure here with `...`',
    or None where the verdict holds on this host."""
    return _elsewhere("verdict", verdict.host, device, _measure_hint(model))


def _check_elsewhere(check: Int8Check, model: ModelRef) -> str | None:
    """The same for a version's int8 check, on the CPU's facts: int8 runs on ONNX Runtime's CPU
    provider, so a GPU beside it changes nothing (a check recorded without facts holds everywhere)."""
    from simpair.models.device import pick_device

    hint = f"simpair models int8-check {model.name} {model.version}"
    return _elsewhere("int8 check", check.host, pick_device("cpu"), hint)


def _elsewhere(what: str, recorded: dict[str, str], device: Any, hint: str) -> str | None:
    from simpair.models.device import host_facts

    differences = host_differences(recorded, host_facts(device))
    if not differences:
        return None
    return f"{what} measured on another host: {', '.join(differences)}; measure here with `{hint}`"


def auto_precision(model: ModelRef | None, backend: str, device: Any) -> tuple[str, str]:
    """The rung `--precision auto` takes for `model` from its stored verdict, and the line saying why."""
    if model is None:
        return "fp32", "auto: fp32 (no pinned model to read a precision verdict of)"
    verdict = PrecisionVerdict.read(Path(model.local_dir))
    if verdict is None:
        return "fp32", f"auto: fp32 ({_no_verdict(model)})"
    elsewhere = _other_host(verdict, model, device)
    if elsewhere is not None:
        return "fp32", f"auto: fp32 ({elsewhere})"
    allowed = allowed_rungs(backend, device)
    chosen = verdict.choose(allowed)
    return chosen.precision, verdict.why(chosen, allowed)


def int8_refusal(model: ModelRef, home: Path | None) -> str | None:
    """Why int8 may not be used for `model`, from what is stored (None: a stored check accepted it).

    A registry version's recorded int8 check (`simpair models int8-check`) comes first; else the int8
    rung of the model's stored precision verdict. Either way, a stored verdict measured on another host
    refuses it: int8 kernels differ with the CPU's VNNI/AMX and ONNX Runtime's version.
    """
    from simpair.models.device import pick_device

    stored = PrecisionVerdict.read(Path(model.local_dir))
    elsewhere = None if stored is None else _other_host(stored, model, pick_device("auto"))
    if elsewhere is not None:
        return elsewhere
    if not model.version.startswith("local-") and home is not None:
        from simpair.registry import registry  # the registry (MLflow) only for a registry version

        c = registry.client(Path(home))
        recorded = Int8Check.from_tags(dict(c.get_model_version(model.name, model.version).tags or {}))
        if recorded is not None and recorded.mode == int8_graph():
            if not recorded.accepted:
                return recorded.reason
            return _check_elsewhere(recorded, model)
        if recorded is not None:  # judged on another graph than this host builds: not trusted here
            again = f"measure again with `simpair models int8-check {model.name} {model.version}`"
            if not recorded.accepted:  # perhaps under stricter limits: its reason says why
                return f"{recorded.reason} (on another int8 graph; {again})"
            if stored is None or stored.rung("int8") is None:
                other = f"{recorded.mode}; here {int8_graph()}"
                return f"int8 check measured on another int8 graph ({other}); {again}"
    verdict = stored
    rung = verdict.rung("int8") if verdict is not None else None
    if verdict is None or rung is None:
        return f"no stored int8 check (measure one with `{_measure_hint(model)}`)"
    stale = int8_graph_note(verdict.host)
    if rung.accepted and stale is not None:
        return f"{stale}; measure again with `{_measure_hint(model)}`"
    if rung.accepted:
        return None
    return f"{rung.reason} (measured {verdict.measured_at} on {verdict.pairs} pairs of {verdict.dev_split})"


def resolve(
    precision: str, backend: str, device: Any | None = None, model: ModelRef | None = None, home: Any = None
) -> tuple[str, str | None]:
    """Decide a run's precision once, before its first chunk: (precision, why auto chose it, or None).

    `device` defaults to the one `load_predictor` would pick here (CUDA if available, else CPU). int8
    is refused (`Int8Refused`, one line) unless the pinned `model` has a stored int8 check that
    accepted it; `home` holds its registry.
    """
    from simpair.models.device import pick_device

    check_precision(precision, backend)
    device = pick_device("auto") if device is None else device
    if precision == "auto":
        return auto_precision(model, backend, device)
    effective = runnable_precision(precision, device)
    if effective != precision:
        warn_fallback(device)
    if precision == "int8":
        if model is None:
            raise ValueError("precision int8 needs the pinned model (its stored int8 check)")
        refusal = int8_refusal(model, home)
        if refusal is not None:
            raise Int8Refused(f"int8 refused for {model.label}: {refusal}; score with --precision fp32")
    return effective, None


def pin_forward(model: ModelRef, precision: str, backend: str, device: Any | None = None) -> ForwardPin:
    """What a resolved `precision` loads with, as the stored verdict says now (`loader.verdict_pin`):
    the fp32 recheck band of its rung and, for bf16, the runtime that measured it."""
    from simpair.models.device import pick_device
    from simpair.runtime.loader import verdict_pin

    return verdict_pin(model.local_dir, precision, backend, pick_device("auto") if device is None else device)


def resolve_run(
    precision: str, backend: str, model: ModelRef, home: Any = None, device: Any | None = None
) -> tuple[str, str | None, ForwardPin]:
    """`resolve`, and the pin its precision loads with (`pin_forward`), read from one and the same
    verdict: a run's stages load with the pin (`loader.load_for_run`), not with the verdict as they
    find it, so a verdict measured again while the run goes on changes nothing before the next run.

    Should the verdict file be replaced between the two reads, both are read again, so a run never
    takes its precision from one measurement and its recheck band or bf16 runtime from another.
    """
    for _ in range(_READS):
        before = _verdict_digest(model)
        chosen, why = resolve(precision, backend, device, model, home)
        pin = pin_forward(model, chosen, backend, device)
        if _verdict_digest(model) == before:
            return chosen, why, pin
    raise RuntimeError(
        f"the precision verdict of {model.label} changed {_READS} times while this run read it; "
        "run again once it is measured"
    )


_READS = 3


def _verdict_digest(model: ModelRef) -> str | None:
    """The verdict file's content digest (written atomically, so a read sees one version whole)."""
    import hashlib

    from simpair.models.precision_verdict import VERDICT_FILE

    try:
        return hashlib.sha256((Path(model.local_dir) / VERDICT_FILE).read_bytes()).hexdigest()
    except OSError:
        return None
