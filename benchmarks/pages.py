"""The generated parts of docs/benchmarks.md (user page) and docs/experiments.md (experiment record).

Both pages are hand-written prose with generated blocks between marker comments:

    <!-- BEGIN generated: NAME (benchmarks/quality.py table) -->
    ...
    <!-- END generated: NAME -->

`write()` rebuilds every block from benchmarks/results/{ingest,quality,scale,score,gpu,score_cascade}.json
and leaves the prose outside the markers alone. `benchmarks/quality.py table` calls it, and so do
ingest.py and score.py after they record a run. The user page's quality table shows only the shipped
default and documented configs (`DEFAULT_ROWS`: which recorded row measures each); the experiment
record lists every row. The user page states what the shipped code does: each table carries its
command, date and machine, and never a commit or a comparison with older code (tests/test_guides.py
checks the page).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
USER_PAGE = REPO / "docs" / "benchmarks.md"
EXPERIMENTS_PAGE = REPO / "docs" / "experiments.md"
NO_CPU = "CPU model not recorded"

# config, what it is, the recorded row that measures it (same recipe), the split shown
DEFAULT_ROWS = [
    ("configs/msrp-cross.yaml", "paraphrase cross-encoder (STS-B stage, then MSRP)",
     "s8-msrp-cross-rerun", "msrp/test"),
    ("configs/msrp-stack.yaml", "paraphrase stack: msrp-cross + segment-cosine cross",
     "s8-msrp-stack-cross-segcos", "msrp/test"),
    ("configs/stsb-bi.yaml", "STS bi-encoder, CoSENT, seed 42",
     "s8-stsb-bi-s42", "stsb/test"),
    ("configs/stsb-bi-soup.yaml", "STS bi-encoder, weight soup of seeds 42 + 7",
     "s8-stsb-bi-soup-s42-s7", "stsb/test"),
    ("configs/stsb-stack.yaml", "STS stack: bi soup + cross-encoder, ridge with products",
     "s9-stsb-stack-soup-cross-products", "stsb/test"),
]  # fmt: skip


def _load(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _date(row: dict[str, Any]) -> str:
    """The day a row's model was trained, from the UTC stamps in its (members') directory names."""
    stamps = re.findall(r"(\d{4})(\d{2})(\d{2})T\d{6}Z", json.dumps([row["model_dir"], row.get("config")]))
    return "-".join(max(stamps)) if stamps else "-"


def _cpu(row: dict[str, Any], runs: dict[str, Any]) -> str:
    """The CPU a row ran on; for a soup or stack, its members' (when they are recorded rows)."""
    if row.get("cpu"):
        return str(row["cpu"]).replace("(R)", "")
    members = set((row.get("config") or {}).get("members") or [])
    cpus = {_cpu(r, runs) for r in runs.values() if r["model_dir"] in members and r is not row}
    return " + ".join(sorted(cpus - {NO_CPU})) or NO_CPU


def _metric(m: dict[str, Any]) -> str:
    # 4 decimals: configs differ at the third (stacks 0.8690 and 0.8697), so 0.8698 must not print as 0.870
    if "accuracy" in m and "f1" in m:
        return f"{m['accuracy']:.4f} / {m['f1']:.4f}"
    return f"{m.get('spearman', 0):.4f}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


# ---------------------------------------------------------------- user page (docs/benchmarks.md)


def ingest_block(r: dict[str, Any]) -> list[str]:
    if not r:
        return ["(no ingest run recorded)"]
    s, p = r["simpair"], r["pandas"]
    lines = [
        f"Command: `{r['command']}`. Measured {r['measured_at'][:10]}, median of {r['repeats']} runs, "
        f"2 CPU cores ({r['machine']}, {NO_CPU}), no GPU. {r['records']:,} raw records (MSRP train + test, "
        "STS-B train + dev + test).",
        "",
        "| reader | seconds | rows/s | records lost or altered |",
        "|---|---:|---:|---:|",
        f"| simpair ingest, end to end (parse, clean, checks, dedupe, Parquet, leakage report) "
        f"| {s['end_to_end_seconds']:.2f} | {s['end_to_end_rows_per_s']:,.0f} | 0 ({s['clean']:,} clean + "
        f"{s['quarantined']} quarantined with a reason) |",
        f"| simpair parse + clean only | {s['parse_clean_seconds']:.2f} "
        f"| {s['parse_clean_rows_per_s']:,.0f} | - |",
    ]
    names = {
        "recipe": "pandas `read_csv(sep='\\t', on_bad_lines='skip')` + `dropna()`, read only",
        "correct_settings": "pandas with `quoting=QUOTE_NONE`, read only, no checks",
    }
    for key, label in names.items():
        v = p[key]
        lines.append(
            f"| {label} | {v['seconds']:.2f} | {v['rows_per_s'] or 0:,.0f} "
            f"| {r['records'] - v['correct']:,} |"
        )
    failed = [f["file"] for f in r.get("per_file", []) if "seconds" not in f["recipe"]]
    if failed:
        lines += ["", "The pandas recipe fails outright on " + ", ".join(f"`{f}`" for f in failed) + "."]
    return lines


def quality_block(q: dict[str, Any]) -> list[str]:
    runs = q.get("runs", {})
    lines = [
        "| config | what it is | test split (pairs) | dev | test | training, 1 thread | date | CPU |",
        "|---|---|---|---:|---:|---:|---|---|",
    ]
    for config, what, name, split in DEFAULT_ROWS:
        row = runs.get(name)
        if row is None or split not in row["test"]:
            lines.append(f"| `{config}` | {what} | {split} | - | - | not measured | - | - |")
            continue
        m = row["test"][split]
        lines.append(
            f"| `{config}` | {what} | {split} ({m['evaluated']:,}) | {_metric(row['dev'])} | {_metric(m)} "
            f"| {_minutes(row['wall_seconds'])} | {_date(row)} | {_cpu(row, runs)} |"
        )
    for b in q.get("baselines", []):
        lines.append(
            f"| - | {b['model']} | {b['split']} ({b['pairs']:,}) | {b.get('dev', '-')} | {b['test']} "
            f"| - | {b['date']} | {b.get('cpu', NO_CPU)} |"
        )
    t = q.get("throughput", {})
    if t:
        ratios = ", ".join(f"{k} {v['speedup']:.2f}x" for k, v in sorted(t.items()))
        loads = sorted(v["loadavg"] for v in t.values() if v.get("loadavg") is not None)
        where = f"2 CPU cores at load average {loads[0]:.1f}-{loads[-1]:.1f}" if loads else "2 CPU cores"
        lines += [
            "",
            "Training throughput against sentence-transformers' own `fit` (same pairs, batch size and "
            f"thread, one process, `benchmarks/quality.py throughput --kind KIND`; {where}, date and CPU "
            f"model not recorded): simpair samples/s / theirs = {ratios}.",
        ]
    return lines


def _interleaved(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in result.get("rows", []) if "interleaved_st_pairs_per_s" in r]


def scoring_block(result: dict[str, Any]) -> list[str]:
    if not result:
        return ["(no scoring run recorded)"]
    lines = [
        f"Command: `{result['command']}`. Measured {result['when'][:10]}, 1 thread, 2 CPU cores "
        f"({result['machine']}, {NO_CPU}), no GPU; other jobs shared the machine, so ours and "
        "sentence-transformers took turns on the same pairs in one process (the ratio is what counts).",
        "",
        "| model (untrained all-MiniLM-L6-v2) | pairs | simpair, ONNX (default) pairs/s "
        "| simpair, torch pairs/s | sentence-transformers pairs/s | speed-up (ONNX) "
        "| max abs score difference |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _interleaved(result):
        lines.append(
            f"| {r['model']} | {r['pairs']:,} | {r['interleaved_onnx_pairs_per_s']:.1f} "
            f"| {r['interleaved_torch_pairs_per_s']:.1f} | {r['interleaved_st_pairs_per_s']:.1f} "
            f"| {r['interleaved_onnx_speedup']:.2f}x | {r['interleaved_onnx_max_abs_diff']:.1e} |"
        )
    return lines


def memory_block(result: dict[str, Any]) -> list[str]:
    if not result:
        return ["(no scoring run recorded)"]
    lines = [
        f"Command: `{result['command']}`. Measured {result['when'][:10]}, 1 thread, 2 CPU cores "
        f"({result['machine']}, {NO_CPU}), no GPU. Peak RSS of the whole process (Python, torch, model, "
        "data), each run in a fresh process.",
        "",
        "| model | pairs | simpair peak RSS MB | sentence-transformers peak RSS MB |",
        "|---|---:|---:|---:|",
    ]
    for r in result.get("rows", []):
        if r.get("torch_peak_rss_mb") is None:
            continue
        theirs = f"{r['st_peak_rss_mb']:,.0f}" if r.get("st_peak_rss_mb") else "not run"
        lines.append(f"| {r['model']} | {r['pairs']:,} | {r['torch_peak_rss_mb']:,.0f} | {theirs} |")
    return lines


SCALE_STEPS = {
    "ingest": "`simpair ingest --no-prefect`",
    "rerun": "the same, unchanged re-run",
    "pretokenize": "`simpair pretokenize` (train split, bi-encoder, MiniLM tokenizer)",
    "train": "`simpair train`: load the tokens + {steps} steps, tiny encoder",
    "evaluate": "`simpair evaluate` (test split, tiny encoder)",
    "polars": "anchor: polars `scan_csv` + `sink_parquet`, streaming",
}


def _size(seconds: float, mb: float) -> str:
    time = f"{seconds:,.1f} s" if seconds < 600 else f"{seconds / 60:,.0f} min"
    return f"{time}, {mb:,.0f} MB" if mb < 10_000 else f"{time}, {mb / 1024:,.1f} GB"


def _scale_cell(m: dict[str, Any] | None) -> str:
    if not m:
        return "-"
    if m.get("skipped"):
        return "not run"
    if m.get("rc") != 0:
        return "failed"
    return f"{_size(m['wall_s'], m['peak_rss_mb'])} (CPU {m['cpu_s']:,.1f} s)"


def _step_dates(r: dict[str, Any]) -> dict[str, str]:
    """The day each step was last measured: the first run's, or the latest `--merge` run that redid it."""
    dates = {name: r["measured_at"][:10] for name in SCALE_STEPS}
    for again in r.get("remeasured", []):
        for name in again["steps"]:
            dates[name] = max(dates.get(name, ""), again["at"][:10])
    return dates


def scale_block(r: dict[str, Any]) -> list[str]:
    """The growth table of benchmarks/scale.py: each step at each size, its per-row cost, 100M rows.

    The user page shows the shipped code only: rows a `--baseline-code` run recorded for older code
    stay in the JSON (and in docs/experiments.md's dated notes), never on this page.
    """
    if not r.get("sizes"):
        return ["(no scale run recorded)"]
    m, sizes = r["machine"], r["sizes"]
    labels = list(sizes)
    dates = _step_dates(r)
    first, last = min(dates.values()), max(dates.values())
    span = first if first == last else f"{first} to {last}"
    lines = [
        f"Command: `{r['command']}` (a step measured again: the same command with `--steps STEP --merge`).",
        f"Measured {span}, each row's date in its own column, on "
        f"{m['cores']} cores ({m['cpu'] or NO_CPU}, {m['ram_gb']:.0f} GB RAM), no GPU; python {m['python']}, "
        f"polars {m['versions'].get('polars')}, torch {m['versions'].get('torch')}. "
        "Cells: wall time, peak RSS (CPU time, user + sys).",
        "",
        "| step | measured | "
        + " | ".join(f"{label} rows ({sizes[label]['raw_bytes'] / 1e6:,.0f} MB)" for label in labels)
        + " | per row (fit) | 100M rows (fit) |",
        "|---|---|" + "---:|" * (len(labels) + 2),
    ]
    for name, what in SCALE_STEPS.items():
        if not any(name in s["steps"] for s in sizes.values()):
            continue
        f = r.get("fits", {}).get(name)
        per_row = at = "-"
        if f:  # a slope below zero is noise around no growth: shown as flat, not extrapolated
            t, mb = f["wall_s"], f["peak_rss_mb"]
            per_row = f"{t['per_row'] * 1e6:,.1f} µs" if t["per_row"] > 0 else "flat"
            per_row += f", {mb['per_row']:,.0f} B" if mb["per_row"] > 0 else ", flat"
            at = _size(max(t["at_100M"], t["intercept"]), max(mb["at_100M"], mb["intercept"]))
        cells = " | ".join(_scale_cell(s["steps"].get(name)) for s in sizes.values())
        step = what.format(steps=r.get("train_steps", 50))
        lines.append(f"| {step} | {dates[name]} | {cells} | {per_row} | {at} |")
    lines += ["", *_scale_notes(r)]
    return lines


def _scale_notes(r: dict[str, Any]) -> list[str]:
    """Pairs/s, the training data's memory, ingest against polars and the accounting, one line each."""
    sizes, fits, notes = r["sizes"], r.get("fits", {}), []
    rates = [f"{k} {s['steps']['pretokenize']['pairs_per_s']:,.0f}" for k, s in sizes.items()
             if s["steps"].get("pretokenize", {}).get("pairs_per_s")]  # fmt: skip
    if rates:
        slope = fits.get("pretokenize", {}).get("wall_s", {}).get("per_row", 0)
        marginal = f"; from the fit, after start-up: {0.8 / slope:,.0f}" if slope > 0 else ""
        notes.append(f"- Pretokenize, train pairs per second of wall time: {', '.join(rates)}{marginal}.")
    train = fits.get("train", {}).get("peak_rss_mb", {})
    if train:
        per_pair = max(train["per_row"] / 0.8, 0)
        notes.append(
            f"- Training data in memory: {per_pair:,.0f} B of peak RSS per train pair on top of "
            f"{train['intercept']:,.0f} MB (fit of the train step's peak RSS)."
        )
    ratios = [f"{k} {s['steps']['ingest']['wall_s'] / s['steps']['polars']['wall_s']:.1f}x"
              for k, s in sizes.items() if s["steps"].get("ingest", {}).get("rc") == 0
              and s["steps"].get("polars", {}).get("rc") == 0]  # fmt: skip
    if ratios:
        notes.append(f"- Ingest wall time / polars' on the same files: {', '.join(ratios)}.")
    checks = [
        f"{k} {a['clean']:,} + {a['quarantined']:,} = {a['raw_lines']:,}" + ("" if a["ok"] else " (MISMATCH)")
        for k, s in sizes.items()
        if (a := s.get("accounting"))
    ]
    reruns = {k: s["rerun_status"] for k, s in sizes.items() if s.get("rerun_status")}
    if reruns:
        said = ", ".join(f"{k} {v}" for k, v in reruns.items())
        notes.append(f"- What the re-run reported for the dataset: {said}.")
    if checks:
        ok = all(s["accounting"]["ok"] for s in sizes.values() if s.get("accounting"))
        verdict = "at every size" if ok else "NOT at every size"
        notes.append(f"- Clean + quarantined = raw lines {verdict}: {'; '.join(checks)}.")
    return notes


GPU_COMMAND = (
    "python benchmarks/gpu.py --pairs ../shared/data/msrp/msr_paraphrase_test.txt --steps 40 "
    "--parts score,train,profile"
)


def gpu_block(r: dict[str, Any]) -> list[str]:
    """benchmarks/gpu.py: bulk scoring on CPU and GPU at the largest batch of pairs, then training steps."""
    if not r.get("rows"):
        return ["(no GPU run recorded)"]
    score = [x for x in r["rows"] if x["part"] == "score"]
    largest = max((x["pairs"] for x in score if x["device"] != "cpu"), default=0)
    lines = [
        f"Command: `{r.get('command', GPU_COMMAND)}`. Measured {r['date'][:10]} on one {r['gpu']} "
        f"({r['cpu_threads']} CPU cores, python {r['python']}, torch {r['torch']}). Model: {r['model']}, "
        f"max length {r['max_length']}; pairs are random pairs of MSRP test sentences.",
        "",
        "| scoring (`Predictor.predict_raw`, the bulk-scoring path) | batch | pairs | pairs/s | peak GPU MB "
        "| largest score change against CPU fp32 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for x in score:
        if x["device"] != "cpu" and x["pairs"] != largest:
            continue
        where = f"CPU ({x.get('threads', '?')} threads)" if x["device"] == "cpu" else "GPU"
        mb = f"{x['peak_gpu_mb']:,.0f}" if x.get("peak_gpu_mb") else ""
        diff = f"{x['max_abs_diff_vs_cpu_fp32']:.1e}" if "max_abs_diff_vs_cpu_fp32" in x else ""
        lines.append(
            f"| {x['kind']}-encoder, {where} {x['precision']} | {x['batch']} | {x['pairs']:,} "
            f"| {x['pairs_per_s']:,.0f} | {mb} | {diff} |"
        )
    train = [x for x in r["rows"] if x["part"] == "train"]
    if train:
        lines += [
            "",
            "| training step (`TrainModule`, AdamW), second pass over the same batches | batch "
            "| pairs/s | first pass pairs/s | peak GPU MB |",
            "|---|---:|---:|---:|---:|",
        ]
        for x in train:
            lines.append(
                f"| {x['kind']}-encoder, {x['precision']} | {x['batch']} | {x['pairs_per_s']:,.0f} "
                f"| {x['first_pass_pairs_per_s']:,.0f} | {x['peak_gpu_mb']:,.0f} |"
            )
    return lines


def cascade_block(r: dict[str, Any]) -> list[str]:
    """benchmarks/score_cascade.py: the cascade against its cross-encoder and `CrossEncoder.predict`."""
    if not r.get("throughput"):
        return ["(no cascade run recorded)"]
    t, q, c, m = r["throughput"], r["msrp_test"], r["cascade"], r["machine"]
    load = m.get("load_avg") or [None]
    # the paths were the measuring machine's, not the reader's
    names = {"cascade": "CASCADE_DIR", "home": "HOME", "out": "OUT.json"}
    command = re.sub(r"--(cascade|home|out) \S+", lambda x: f"--{x[1]} {names[x[1]]}", r["command"])
    verdict = r["precision_verdict"].removeprefix("auto: ")
    lines = [
        f"Command: `{command}`.",
        f"Measured {r['measured_at'][:10]} on {m['cpus']} CPU cores "
        f"({NO_CPU}, python {m['python']}), {r['threads']} threads, no GPU"
        + (f", load average {load[0]:.1f} at the start" if load[0] is not None else "")
        + ".",
        f"Cascade: members {', '.join(f'`{x}`' for x in c['members'])}, band ({c['band_low']:.3f}, "
        f"{c['band_high']:.3f}), fitted on {c['dev_pairs']} dev pairs"
        + (f" and {c['pool_pairs']:,} pool pairs" if c.get("pool_pairs") else "")
        + f"; `auto` precision verdict: {verdict}. The batch holds "
        f"{t['batch']['distinct_sentences']:,} distinct sentences.",
        "",
        "| contender | MSRP test F1 | accuracy | pairs | pairs/s (wall) | pairs per CPU second "
        "| share of rows to the cross-encoder |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "cascade_auto": ("cascade, `--precision auto` (the default)", q.get("cascade_auto", {})),
        "cascade": ("cascade, fp32", q.get("cascade", {})),
        "cross": ("its cross-encoder alone", q.get("cross", {})),
        "sentence_transformers": ("`CrossEncoder.predict`", q.get("sentence_transformers", {})),
    }
    for key, (label, test) in names.items():
        if key not in t:
            continue
        x = t[key]
        share = f"{x['share_to_cross']:.1%}" if "share_to_cross" in x else "-"
        lines.append(
            f"| {label} | {test.get('f1', 0):.4f} | {test.get('accuracy', 0):.4f} | {x['rows']:,} "
            f"| {x['pairs_per_s']:,.0f} | {x['pairs_per_cpu_s']:,.0f} | {share} |"
        )
    auto = q.get("cascade_auto", {})
    if auto:
        lines += [
            "",
            f"On MSRP test ({q['pairs']:,} pairs) the default cascade sends {auto['share_to_cross']:.1%} to "
            f"the cross-encoder and its decisions differ from the cross-encoder's on "
            f"{auto['disagreement_with_cross']:.2%} of pairs (fp32: {q['disagreement_with_cross']:.2%}).",
        ]
    return lines


# ---------------------------------------------------------- experiment record (docs/experiments.md)


def runs_block(q: dict[str, Any]) -> list[str]:
    runs = q.get("runs", {})
    lines = [
        "| row | kind | objective | train data | test split | excl. | metric | dev | test | epochs "
        "| precision | wall s | samples/s | date | CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in sorted(runs.items()):
        for split, m in row["test"].items():
            metric = "accuracy / F1" if "accuracy" in m else "Spearman"
            dev = row["dev"]
            dev_v = _metric(dev) if "accuracy" in dev or "spearman" in dev else "-"
            asked = str(row["config"].get("precision", "auto")).replace("auto", "fp32")  # auto: fp32 on CPU
            ran = row.get("autocast")
            precision = f"{ran} ({asked} asked)" if ran and ran != asked else asked
            speed = f"{row['train_samples_per_s']:.1f}" if row["train_samples_per_s"] else "-"
            init = f" (init {Path(row['init_from']).name})" if row.get("init_from") else ""
            lines.append(
                f"| `{name}` | {row['kind']} | {row['objective']} | {', '.join(row['train'])}{init} "
                f"| {split} | {m['excluded_leaked']} | {metric} | {dev_v} | {_metric(m)} "
                f"| {row['epochs_run']} | {precision} | {row['wall_seconds']:.0f} | {speed} "
                f"| {_date(row)} | {_cpu(row, runs)} |"
            )
    return lines


def commands_block(q: dict[str, Any]) -> list[str]:
    """One command per row, one per line (HOME: the pipeline home; MODEL_DIR: a trained model)."""
    return [_command_item(name, row["command"]) for name, row in sorted(q.get("runs", {}).items())]


def _command_item(name: str, command: str) -> str:
    """One list item per run; a long command is a code block with one option per line."""
    if len(command) <= 300:
        return f"- row `{name}`: `{command}`"
    parts = re.split(r" (?=--)", command)
    body = " \\\n    ".join(parts)
    return f"- row `{name}`:\n\n  ```\n  {body}\n  ```\n"


def training_speed_block(q: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if q.get("throughput"):
        lines += [
            "Throughput against sentence-transformers (same pairs, batch size, threads, one process; "
            "`benchmarks/quality.py throughput --kind KIND`):",
            "",
            "| kind | pairs | batch | threads | sentence-transformers fit samples/s | simpair samples/s "
            "| ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        for kind, t in sorted(q["throughput"].items()):
            lines.append(
                f"| {kind} | {t['pairs']} | {t['batch_size']} | {t['threads']} "
                f"| {t['sentence_transformers_fit_samples_per_s']:.1f} | {t['simpair_samples_per_s']:.1f} "
                f"| {t['speedup']:.2f}x |"
            )
        lines.append("")
    if q.get("precision"):
        lines += [
            "Training speed, fp32 vs bf16 autocast (same pairs, rounds taking turns, 1 thread; "
            "`benchmarks/quality.py precision --kind KIND`):",
            "",
            "| kind | pairs | rounds | native bf16 | fp32 samples/s | bf16 samples/s | bf16 / fp32 |",
            "|---|---|---|---|---|---|---|",
        ]
        for kind, t in sorted(q["precision"].items()):
            lines.append(
                f"| {kind} | {t['pairs']} | {t['rounds']} | {t['native_bf16']} "
                f"| {', '.join(f'{v:.1f}' for v in t['fp32_samples_per_s'])} "
                f"| {', '.join(f'{v:.1f}' for v in t['bf16_samples_per_s'])} | {t['speedup']:.2f}x |"
            )
    return lines


def groups_block(q: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for split, table in sorted(q.get("groups", {}).items()):
        models = table["models"]
        names = sorted({g for m in models.values() for g in m["by_group"]})
        counts = {g: n for m in models.values() for g, n in m["group_n"].items()}
        metric = next(iter(models.values()))["metric"] if models else "spearman"
        lines += [
            f"{split} {metric} per group of pair ids (`{table['pattern']}`; command `benchmarks/quality.py "
            f"groups --member MODEL_DIR ... --split {split} --home HOME`):",
            "",
            "| model | all | " + " | ".join(f"{g} ({counts[g]})" for g in names) + " |",
            "|---|---|" + "---|" * len(names),
        ]
        for model, m in models.items():
            cells = " | ".join(
                f"{m['by_group'][g]:.3f}" if isinstance(m["by_group"].get(g), float) else "-" for g in names
            )
            lines.append(f"| {model} | {m['all']:.3f} | {cells} |")
        lines.append("")
    return lines[:-1] if lines else lines


def scoring_detail_block(result: dict[str, Any]) -> list[str]:
    """The full scoring tables (fresh processes, interleaved, bf16 opt-in of the latest quick run)."""
    if not result:
        return ["(no scoring run recorded)"]
    import score_tables  # benchmarks/score_tables.py: the tables, without the section heading

    lines = [
        f"Command: `{result['command']}`, {result['when']}, {result['machine']}.",
        "",
        *score_tables.tables(result),
    ]
    quick = [r for r in result.get("quick_runs", []) if "bf16_impact" in r]
    if quick:
        run = quick[-1]
        lines += ["", f"bf16 opt-in, quick run: `{run['command']}`, {run['when']}, {run['machine']}."]
        lines += score_tables.bf16_markdown(run)
    return lines


# ---------------------------------------------------------------------------------------- writing


def blocks() -> dict[Path, dict[str, list[str]]]:
    ingest, quality, score_result = _load("ingest"), _load("quality"), _load("score")
    return {
        USER_PAGE: {
            "ingest": ingest_block(ingest),
            "scale": scale_block(_load("scale")),
            "quality": quality_block(quality),
            "scoring": scoring_block(score_result),
            "memory": memory_block(score_result),
            "gpu": gpu_block(_load("gpu")),
            "cascade": cascade_block(_load("score_cascade")),
        },
        EXPERIMENTS_PAGE: {
            "training-rows": runs_block(quality),
            "training-commands": commands_block(quality),
            "training-speed": training_speed_block(quality),
            "groups": groups_block(quality),
            "scoring": scoring_detail_block(score_result),
        },
    }


def replace_block(text: str, name: str, body: list[str]) -> str:
    begin = f"<!-- BEGIN generated: {name} (benchmarks/quality.py table) -->"
    end = f"<!-- END generated: {name} -->"
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"marker pair for {name!r} missing: {begin} ... {end}")
    return text[: start + len(begin)] + "\n" + "\n".join(body).rstrip() + "\n" + text[stop:]


def write() -> list[Path]:
    """Rewrite every generated block of both pages; the prose around them stays as it is."""
    written = []
    for page, parts in blocks().items():
        text = page.read_text(encoding="utf-8")
        for name, body in parts.items():
            text = replace_block(text, name, body)
        page.write_text(text, encoding="utf-8")
        written.append(page)
    return written
