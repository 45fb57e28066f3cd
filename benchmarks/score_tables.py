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
