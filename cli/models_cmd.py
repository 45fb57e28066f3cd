"""CLI commands for the registry: `models` (and `models int8-check`), `promote`, `rollback`.

They read and move the MLflow registry's aliases through `simpair.registry`; none of them imports
Prefect, so they and `simpair --help` stay fast.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from simpair import settings
from simpair.cli import import_cmd
from simpair.cli.common import (
    HomeOption,
    JsonOutOption,
    ProfileOption,
    Task,
    console,
    json_owns_stdout,
    print_markdown,
    report_console,
    write_json,
)
from simpair.cli.failures import fail

TaskOption = Annotated[str, typer.Option("--task", help="paraphrase | sts | all")]
ReasonOption = Annotated[str | None, typer.Option(help="Why (recorded in the champion history).")]


def _tasks(task: str) -> list[str]:
    from simpair.registry import MODEL_NAMES

    if task == "all":
        return list(MODEL_NAMES)
    if task not in MODEL_NAMES:
        raise typer.BadParameter(f"--task must be one of {sorted(MODEL_NAMES)} or 'all', got {task!r}")
    return [task]


def _against(compared_with: str) -> str:
    return f"v{compared_with}" if compared_with.isdigit() else compared_with


def canary_summary(tags: dict[str, str]) -> str:
    """`<split> <metric> <challenger> vs <zero-shot> ok|FAIL` per canary the gate recorded on a version."""
    from simpair.selection.gate import CanaryResult

    figures: dict[tuple[str, str], dict[str, str]] = {}
    for key, value in tags.items():
        if key.startswith("gate.canary.") and key.count(".") >= 4:
            label, metric, role = key.removeprefix("gate.canary.").rsplit(".", 2)
            figures.setdefault((label, metric), {})[role] = value
    parts = []
    for (label, metric), values in sorted(figures.items()):
        try:
            chal, zero = float(values["challenger"]), float(values["zero_shot"])
        except (KeyError, ValueError):
            continue
        verdict = ""
        if "margin" in values:
            passed = CanaryResult(label, metric, chal, zero, float(values["margin"])).passed
            verdict = " ok" if passed else " FAIL"
        parts.append(f"{label} {metric} {chal:.3f} vs {zero:.3f}{verdict}")
    return "\n".join(parts)


def model_rows(home: Path) -> list[dict[str, str]]:
    """Every version of every simpair model: aliases, key metric, what the gate compared, its decision.

    A fresh home's registry is read without importing MLflow (`simpair.registry_probe`): no versions.
    """
    from simpair.registry_probe import registered_versions

    uri = settings.tracking_uri(home, create=False)
    names = [f"simpair-{t.value}" for t in Task]
    if all(registered_versions(uri, name) == 0 for name in names):
        return []
    from simpair.registry import MODEL_NAMES, registry
    from simpair.selection.gate import DEFAULT_PRIMARY

    c = registry.client(home)
    rows: list[dict[str, str]] = []
    for task, name in MODEL_NAMES.items():
        primary = DEFAULT_PRIMARY[task]
        versions = registry.list_versions(c, name)
        aliases_of: dict[str, list[str]] = {}
        if versions:  # search results do not carry aliases; the registered model does
            for alias, version in (c.get_registered_model(name).aliases or {}).items():
                aliases_of.setdefault(str(version), []).append(alias)
        for mv in versions:
            tags = mv.tags or {}
            gated = [v for k, v in tags.items() if k.startswith("gate.challenger.") and k.endswith(primary)]
            compared = [
                v
                for k, v in tags.items()
                if k.startswith(("gate.champion.", "gate.zero_shot.")) and k.endswith(primary)
            ]
            created = datetime.fromtimestamp(mv.creation_timestamp / 1000, UTC).strftime("%Y-%m-%d %H:%M")
            rows.append(
                {
                    "model": name,
                    "version": str(mv.version),
                    "aliases": ", ".join(sorted(aliases_of.get(str(mv.version), []))),
                    "created (UTC)": created,
                    "primary": primary,
                    "value": gated[0] if gated else "",
                    "compared with": (
                        f"{compared[0]} ({_against(tags.get('gate.compared_with', ''))})" if compared else ""
                    ),
                    "gate": tags.get("gate.decision", "not gated")
                    + (" (manually promoted)" if "manual_promotion.reason" in tags else ""),
                    "canaries (vs zero-shot)": canary_summary(tags),
                }
            )
    return rows


def models_table(home: Path, rows: list[dict[str, str]] | None = None) -> Table:
    """`model_rows` as a table; the canary column appears only when some version was gated with
    canaries, so tables of homes without them keep their width."""
    rows = model_rows(home) if rows is None else rows
    columns = ["model", "version", "aliases", "created (UTC)", "primary", "value", "compared with", "gate"]
    if any(row["canaries (vs zero-shot)"] for row in rows):
        columns.append("canaries (vs zero-shot)")
    table = Table(title=f"simpair models ({settings.tracking_uri(home, create=False)})")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(row[c] for c in columns))
    return table


def models(ctx: typer.Context, home: HomeOption = None, json_out: JsonOutOption = None) -> None:
    """Table of registered versions: aliases (champion, challenger), metrics, gate, canaries.

    `simpair models int8-check NAME VERSION` measures whether a version may score in int8.
    """
    if ctx.invoked_subcommand is not None:
        return
    home_path = settings.home_dir(home)
    rows = model_rows(home_path)
    out = report_console(json_out)
    if rows:
        out.print(models_table(home_path, rows))
    else:  # a hint, not a table of nothing
        out.print(
            f"no model registered in {settings.tracking_uri(home_path, create=False)}: train one with "
            "`simpair nightly`, or bring one with `simpair models import DIR --task paraphrase|sts`",
            markup=False,
        )
    write_json(rows, json_out)


def promote(
    task: TaskOption = "all",
    version: Annotated[
        int | None, typer.Option(help="Make this version champion (manual override; needs --reason).")
    ] = None,
    reason: ReasonOption = None,
    profile: ProfileOption = "default",
    home: HomeOption = None,
) -> None:
    """Run the promotion gate on the current challenger, or promote --version N with a --reason."""
    from simpair.nightly.profile import load_profile
    from simpair.registry import model_name
    from simpair.registry.registry import CorruptModel, ModelNotFound
    from simpair.selection.promotion import promote_manual, run_gate
    from simpair.training.reviews import traffic_split

    out = console()
    home_dir = settings.home_dir(home)
    if version is not None:
        if task == "all":
            raise typer.BadParameter("--version needs --task paraphrase or --task sts", param_hint="--task")
        if not reason:
            raise typer.BadParameter(
                "--version needs --reason '...': a manual promotion must say why", param_hint="--reason"
            )
        name = model_name(task)
        try:
            previous = promote_manual(home_dir, name, str(version), reason or "", by="cli")
        except Exception as exc:  # unknown version, registry down
            fail(f"{name} version {version}: {exc}", exc)
        out.print(f"{name}: champion v{previous or '-'} -> v{version} (manual: {reason})", markup=False)
        return
    plan = load_profile(profile)
    failed: list[str] = []
    for t in _tasks(task):
        if t not in plan.tasks:
            out.print(f"{t}: not in profile {plan.name}; skipped", markup=False)
            continue
        try:
            traffic = traffic_split(home_dir, t, plan.tasks[t].reviews)  # the night's traffic check too
            decision = run_gate(home_dir, t, plan.tasks[t].gate, plan.tasks[t].evaluate, traffic=traffic)
        except (ModelNotFound, CorruptModel) as exc:
            failed.append(f"{model_name(t)}: {exc}")
            continue
        print_markdown(out, decision.to_markdown(model_name(t)))
    if failed:  # the tasks that could be gated were; one line for those that could not
        fail("; ".join(failed))


def rollback(
    task: TaskOption = "paraphrase",
    reason: ReasonOption = "manual rollback",
    home: HomeOption = None,
) -> None:
    """Point `champion` back at the previous champion recorded in the champion_history tag.

    With `--task all` every model is rolled back on its own; one that cannot be (no earlier
    champion) is reported and the command exits 1 after doing the others.
    """
    from simpair.registry import model_name, registry

    out = console()
    names = [model_name(t) for t in _tasks(task)]
    outcomes = registry.rollback_each(registry.client(settings.home_dir(home)), names, reason=reason)
    for outcome in outcomes:
        if outcome.ok:
            moved = f"v{outcome.moved_from} -> v{outcome.moved_to}"
            out.print(f"{outcome.name}: champion {moved} (rollback: {reason})", markup=False)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        why = "; ".join(o.error if o.error and o.name in o.error else f"{o.name}: {o.error}" for o in failed)
        fail(f"{len(failed)} of {len(outcomes)} model(s) not rolled back: {why}")


def int8_check(
    name: Annotated[str, typer.Argument(help="Registered model, e.g. simpair-paraphrase.")],
    version: Annotated[str, typer.Argument(help="Its version number.")],
    max_delta: Annotated[
        float | None, typer.Option(min=0, help="Largest allowed change of the dev metric (0.005).")
    ] = None,
    max_flip_share: Annotated[
        float | None, typer.Option(min=0, max=1, help="Largest allowed share of flipped labels (0.01).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Measure again, even if recorded.")] = False,
    home: HomeOption = None,
) -> None:
    """Measure int8 against fp32 on a version's dev split; record the verdict on the version.

    A recorded measurement is reused: given limits re-judge it, `--force` measures again.
    Exits 1 when int8 is refused, so a script can stop before scoring in int8.
    """
    from simpair.models.int8_check import Int8Limits, Int8Refused
    from simpair.selection.int8_guard import check_version

    out = console()
    limits = None
    if max_delta is not None or max_flip_share is not None:
        defaults = Int8Limits.from_env()
        limits = Int8Limits(
            defaults.max_delta if max_delta is None else max_delta,
            defaults.max_flip_share if max_flip_share is None else max_flip_share,
        )
    try:
        check = check_version(settings.home_dir(home), name, version, limits, force=force)
    except Int8Refused as exc:
        fail(str(exc), exc)
    flips = "n/a" if check.label_flip_share is None else f"{check.label_flip_share:.2%}"
    out.print(
        f"{name}/{version}: dev {check.metric} fp32 {check.metric_fp32:.4f}, int8 {check.metric_int8:.4f}"
        f" (delta {check.delta:+.4f}, limit {check.max_delta:g}), labels flipped {flips} "
        f"(limit {check.max_flip_share:.2%}), {check.pairs} pairs of {check.dev_split}, "
        f"int8 {check.mode}, measured {check.measured_at}",
        soft_wrap=True,
    )
    if not check.accepted:
        fail(f"int8 refused for {name}/{version}: {check.reason}")
    out.print(f"[green]int8 accepted[/] for {escape(name)}/{escape(version)}", soft_wrap=True)


def verdict(
    model: Annotated[
        str, typer.Argument(help="A model folder, or a registry ref such as simpair-sts@champion.")
    ],
    force: Annotated[bool, typer.Option("--force", help="Measure again, even if one is stored.")] = False,
    home: HomeOption = None,
) -> None:
    """Measure a model's precision ladder (fp32, bf16, int8) on its dev split, and store the verdict.

    `--precision auto` reads it when scoring; a model without one scores at fp32. A stored verdict is
    shown as it is unless `--force`. Exits 1 when the model records no dev split to measure on.
    """
    from simpair.runtime.graph_cache import follow_home
    from simpair.runtime.model_ref import resolve_model_ref
    from simpair.selection.precision_ladder import NoDevSplit, verdict_for

    home_dir = settings.home_dir(home)
    ref = resolve_model_ref(model, home_dir)
    try:
        with follow_home(home):  # the graphs it builds are the ones `simpair score --home` then reads
            stored = verdict_for(ref, home_dir, force=force)
    except NoDevSplit as exc:
        fail(f"no precision verdict for {ref.label}: {exc}", exc)
    console().print(
        f"{ref.label}: {stored.why(stored.choose())}; measured {stored.measured_at} on {stored.pairs} pairs "
        f"of {stored.dev_split}",
        soft_wrap=True,
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add `simpair models` (with `int8-check`, `verdict`, `import`), `promote` and `rollback` to the app."""
    app.command("promote")(promote)
    app.command("rollback")(rollback)
    models_app = typer.Typer(no_args_is_help=False)
    models_app.callback(invoke_without_command=True)(json_owns_stdout(models))
    models_app.command("int8-check")(int8_check)
    models_app.command("verdict")(verdict)
    import_cmd.register(models_app)  # `models import`
    app.add_typer(models_app, name="models")
