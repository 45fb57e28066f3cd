"""The bulk-scoring tables (`benchmarks/score.py`'s results) as markdown, for its summary and the docs pages.

Kept apart from the benchmark itself so that the page writer (`pages.py`) and the benchmark, which
rewrites the pages after a run, do not import each other.
"""

from __future__ import annotations

from pathlib import Path

from common import BATCH, MAX_LENGTH  # benchmarks/common.py

SECTION = "## Bulk scoring (`benchmarks/score.py`)"


def _fmt(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def markdown(result: dict) -> str:
    """The run's tables and findings, printed at the end of a run."""
    lines = [
        SECTION,
        "",
        f"Measured {result['when']} on {result['machine']} (shared with other jobs), "
        f"batch {BATCH}, max length {MAX_LENGTH}. Command: `{result['command']}`.",
        "",
        *tables(result),
        "",
        *default_markdown(result.get("default_precision")),
        "",
        *result.get("findings", []),
        "",
    ]
    return "\n".join(lines)


def tables(result: dict) -> list[str]:
    """The fresh-process and interleaved tables (and bf16 ones when the run has them)."""
    lines = [
        "Ours = `score_inbox` end to end from a Parquet file to the scored Parquet output (read, validate, "
        "score, write, ledger), with the torch forward pass (`--backend torch`) or ONNX Runtime "
        "(`--backend onnx`; what the default `auto` picks on CPU).\n"
        "Theirs = sentence-transformers `CrossEncoder.predict` / `SentenceTransformer.encode` + cosine on "
        "the same pairs already in memory. Model load excluded for both.\nPeak RSS is the whole process "
        "(Python + torch + model + data). Speed-up and max abs diff are against theirs.",
        "",
        "| model | pairs | threads | distinct sentences | ours torch pairs/s | ours onnx pairs/s "
        "| theirs pairs/s | speed-up torch / onnx | max abs diff torch / onnx "
        "| peak RSS MB ours / theirs | note |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in (r for r in result["rows"] if "st_pairs_per_s" in r or "torch_pairs_per_s" in r):
        speed = " / ".join(_fmt(r.get(f"{b}_speedup"), 2) + "×" if r.get(f"{b}_speedup") else "–"
                           for b in ("torch", "onnx"))  # fmt: skip
        diff = " / ".join(f"{r[f'{b}_max_abs_diff']:.1e}" if r.get(f"{b}_max_abs_diff") is not None else "–"
                          for b in ("torch", "onnx"))  # fmt: skip
        lines.append(
            f"| {r['model']} | {r['pairs']:,} | {r['threads']} | {r['distinct_share']:.0%} | "
            f"{_fmt(r.get('torch_pairs_per_s'))} | {_fmt(r.get('onnx_pairs_per_s'))} | "
            f"{_fmt(r.get('st_pairs_per_s'))} | {speed} | {diff} | "
            f"{_fmt(r.get('torch_peak_rss_mb'))} / {_fmt(r.get('st_peak_rss_mb'))} | {r['note']} |"
        )
    lines += [
        "",
        "Same pairs, ours and theirs taking turns on 20 slices in one process (the ratio that survives a "
        "noisy shared machine; ours = the chunk scoring step without Parquet I/O).\nTheirs at batch "
        f"{BATCH} (the batch every table here uses), and for the cross-encoder also at batch 32 "
        '(`CrossEncoder.predict`\'s default) and 8 (its fastest here); "vs best theirs" divides by the '
        "fastest of those. Load average (1/5/15 min) read at the end of the interleaved run:",
        "",
        f"| model | pairs | ours torch pairs/s | ours onnx pairs/s | theirs pairs/s b{BATCH} / b32 / b8 "
        f"| speed-up vs theirs b{BATCH} torch / onnx | speed-up onnx vs best theirs "
        "| max abs diff torch / onnx | onnx graph | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in result["rows"]:
        if "interleaved_st_pairs_per_s" not in r:
            continue
        theirs = " / ".join(_fmt(r.get(f"interleaved_{k}_pairs_per_s"), 1) for k in ("st", "st_b32", "st_b8"))
        load = " / ".join(f"{x:.1f}" for x in r.get("interleaved_loadavg", ()))
        lines.append(
            f"| {r['model']} | {r['pairs']:,} | {_fmt(r['interleaved_torch_pairs_per_s'], 1)} | "
            f"{_fmt(r['interleaved_onnx_pairs_per_s'], 1)} | {theirs} | "
            f"{r['interleaved_torch_speedup']:.2f}× / {r['interleaved_onnx_speedup']:.2f}× | "
            f"{r['interleaved_onnx_speedup_vs_best_st']:.2f}× | "
            f"{r['interleaved_torch_max_abs_diff']:.1e} / {r['interleaved_onnx_max_abs_diff']:.1e} | "
            f"{r.get('interleaved_onnx_variant', '–')} | {load} |"
        )
    return lines + bf16_markdown(result)


def bf16_markdown(result: dict) -> list[str]:
    """The opt-in bf16 tables: speed from the interleaved run, decision impact from `--parts impact`."""
    lines: list[str] = []
    rows = [r for r in result["rows"] if "interleaved_torch_bf16_pairs_per_s" in r]
    if rows:
        native = all(r.get("interleaved_bf16_native") for r in rows)
        lines += [
            "",
            "**bf16 opt-in** (`--precision bf16`; not the default, since scores are not identical): "
            "ours with the torch forward pass under bf16 autocast, in the same interleaved run as above"
            + ("" if native else " (**no native bf16 on this machine: it ran fp32**)")
            + ". Max abs diff against theirs (fp32) and against our own fp32 torch path:",
            "",
            f"| model | pairs | ours bf16 pairs/s | speed-up vs theirs b{BATCH} / best theirs "
            "| vs our fp32 torch / onnx | max abs diff vs theirs | vs our fp32 | load avg |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in rows:
            load = " / ".join(f"{x:.1f}" for x in r.get("interleaved_loadavg", ()))
            lines.append(
                f"| {r['model']} | {r['pairs']:,} | {_fmt(r['interleaved_torch_bf16_pairs_per_s'], 1)} | "
                f"{r['interleaved_torch_bf16_speedup']:.2f}× / "
                f"{r['interleaved_torch_bf16_speedup_vs_best_st']:.2f}× | "
                f"{r['interleaved_torch_bf16_speedup_vs_torch']:.2f}× / "
                f"{r['interleaved_torch_bf16_speedup_vs_onnx']:.2f}× | "
                f"{r['interleaved_torch_bf16_max_abs_diff']:.1e} | "
                f"{r['interleaved_bf16_vs_fp32_max_abs_diff']:.1e} | {load} |"
            )
    impact = result.get("bf16_impact")
    if impact:
        para, sts = impact["paraphrase"], impact["sts"]
        load = " / ".join(f"{x:.1f}" for x in impact["loadavg_after"])

        def name(part: dict) -> str:
            kind = "trained" if part["trained"] else "untrained backbone, proxy only"
            return f"`{Path(part['model']).name}` ({kind})"

        lines += [
            "",
            f"bf16 decision impact (fp32 vs bf16, both the torch forward pass, same pairs; load avg {load}):",
            "",
            "| test pairs | model | pairs | max / mean / p99 abs score change | decisions |",
            "|---|---|---:|---:|---|",
            f"| MSRP test | {name(para)} | {para['pairs']:,} | {para['max_abs_diff']:.1e} / "
            f"{para['mean_abs_diff']:.1e} / {para['p99_abs_diff']:.1e} | "
            f"{para['label_flips']} labels flip ({para['label_flip_share']:.2%}) at its dev threshold "
            f"{para['threshold']:.3f}, {para['flips_at_0.5']} at 0.5; accuracy {para['accuracy_fp32']:.4f} → "
            f"{para['accuracy_bf16']:.4f} |",
            f"| STS-B test | {name(sts)} | {sts['pairs']:,} | {sts['max_abs_diff']:.1e} / "
            f"{sts['mean_abs_diff']:.1e} / {sts['p99_abs_diff']:.1e} | Spearman vs gold "
            f"{sts['spearman_fp32']:.4f} → {sts['spearman_bf16']:.4f}; fp32 vs bf16 "
            f"{sts['spearman_fp32_vs_bf16']:.5f} |",
        ]
    return lines


def _verdict_cell(row: dict) -> str:
    """'int8: 0.2% dev flips, F1 -0.001' for the chosen rung (or what refused the faster ones)."""
    verdict = row.get("verdict") or {}
    rungs = {r["precision"]: r for r in verdict.get("rungs", ())}
    parts = []
    for name in ("bf16", "int8"):
        r = rungs.get(name)
        if r is None:
            continue
        if r["verdict"] == "skipped":
            parts.append(f"{name} skipped (no native bf16)" if name == "bf16" else f"{name} skipped")
            continue
        flips = "" if r.get("label_flip_share") is None else f"{r['label_flip_share']:.1%} flips, "
        parts.append(
            f"{name} {r['verdict']} ({flips}{verdict.get('metric', 'metric')} {r['metric_delta']:+.4f})"
        )
    where = (
        f" on {verdict['pairs']:,} pairs of {verdict['dev_split']}" if verdict else " (no dev split: fp32)"
    )
    return f"**{row['chosen']}**; " + "; ".join(parts) + where


def default_markdown(run: dict | None) -> list[str]:
    """The default (`--precision auto`) rows: ours against sentence-transformers' fast backends.

    Two ratios to each backend: chained through theirs on torch (timed in both environments, each
    taking turns with the others), and direct (pairs/s of the two interleaved runs, minutes apart).
    They differ by how fast the two environments run theirs on torch (transformers 5 against 4).
    """
    if not run:
        return []
    load = " / ".join(f"{x:.1f}" for x in run["loadavg_end"])
    lines = [
        f"**Default precision (`auto`) against sentence-transformers' backends**, measured {run['when']} on "
        f"{run['cpu']}, {run['threads']} threads, load {load} at the end. Ours: the default backend at the "
        "precision the model's cached verdict picks (and fp32), taking turns with theirs on torch; "
        "theirs: `backend=` torch / onnx / openvino / onnx + dynamic int8, taking turns in a side virtual "
        "environment (`benchmarks/st_backends.py`). Chained: (ours ÷ theirs torch) ÷ (X ÷ theirs torch); "
        "direct: the pairs/s of the two runs.",
        "",
        "| model | pairs | ours default (precision) / fp32 pairs/s | ST torch pairs/s, main / side env "
        "| ST onnx / openvino / onnx-int8 pairs/s | ours default ÷ ST torch "
        "| **ours default ÷ ST openvino**, chained / direct "
        "| ours default ÷ ST onnx-int8, chained / direct |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in run["rows"]:
        mine, theirs = r["main"]["pairs_per_s"], r["side"]["pairs_per_s"]
        direct = {b: mine["ours_default"] / theirs[b] for b in ("st_openvino", "st_onnx_int8")}
        lines.append(
            f"| {r['model']} | {r['pairs']:,} | {mine['ours_default']:.1f} ({r['chosen']}) / "
            f"{mine['ours_fp32']:.1f} | {mine['st']:.1f} / {theirs['st']:.1f} | {theirs['st_onnx']:.1f} / "
            f"{theirs['st_openvino']:.1f} / {theirs['st_onnx_int8']:.1f} | {r['ours_default_vs_st']:.2f}× | "
            f"**{r['ours_default_vs_st_openvino']:.2f}× / {direct['st_openvino']:.2f}×** "
            f"| {r['ours_default_vs_st_onnx_int8']:.2f}× / {direct['st_onnx_int8']:.2f}× |"
        )
    lines += [
        "",
        "| model | chosen (dev verdict) | max abs diff vs ST torch: ours default / openvino / onnx-int8 "
        "| peak RSS MB: ours default / ST torch / openvino / onnx-int8 | test split: fp32 → chosen |",
        "|---|---|---:|---:|---|",
    ]
    for r in run["rows"]:
        diff, theirs = r["main"]["max_abs_diff_vs_st"], r["side"]["max_abs_diff_vs_st"]
        rss, test, chosen = r["side"]["peak_rss_mb"], r["test"], r["chosen"]
        metric = "f1" if r["kind"] == "cross" else "spearman"
        quality = f"{metric} {test[f'{metric}_fp32']:.4f} → {test[f'{metric}_{chosen}']:.4f}"
        if "label_flips" in test:
            quality += f" ({test['label_flips']} of {test['pairs']:,} labels flip)"
        else:
            quality += f" ({test['pairs']:,} pairs, max score change {test['max_abs_diff']:.1e})"
        lines.append(
            f"| {r['model']} | {_verdict_cell(r)} | {diff['ours_default']:.1e} / "
            f"{theirs['st_openvino']:.1e} / {theirs['st_onnx_int8']:.1e} | "
            f"{_fmt(r['peak_rss_mb']['ours_default'])} / {_fmt(rss['st'])} / "
            f"{_fmt(rss['st_openvino'])} / {_fmt(rss['st_onnx_int8'])} | {quality} |"
        )
    first = run["rows"][0]["side"] if run["rows"] else {}
    if first:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(first.get("versions", {}).items()))
        lines += [
            "",
            f"OpenVINO's default inference precision here: {first['openvino_inference_precision']}; "
            f"ONNX int8 config: {first['quantization_config']}. Side environment: {versions}.",
        ]
    if run.get("main_versions"):
        main = ", ".join(f"{k} {v}" for k, v in sorted(run["main_versions"].items()))
        lines.append(f"Main environment: {main}.")
    return lines
