"""int8 scoring benchmark: our quantized ONNX graph against sentence-transformers' fp32 CrossEncoder.

Run by hand, niced (the machine is shared):

    nice -n 10 .venv/bin/python benchmarks/score_int8.py --pairs 2000 --threads 1

What is measured, in one process, taking turns slice by slice so every contender sees the same load:

- speed: pairs/s of `CrossEncoder.predict` (fp32, batch 64), ours in fp32 (ONNX Runtime) and ours in
  int8, per-row (the default), dynamic and static, on the same weights (the bundled
  all-MiniLM-L6-v2 saved as our cross-encoder with a seeded head, `benchmarks/common.py::build_models`)
  and the same random pairs of MSRP sentences; ratios are against sentence-transformers from this one run;
- score change of each int8 mode against fp32 on those pairs (max and mean absolute difference);
- batch invariance: the backbone as cross- and bi-encoder, fp32 and each int8 mode, the same pairs
  scored at batch sizes 64, 8 and 1 and shuffled: the largest change of a pair's score;
- decisions: MSRP test pairs through a trained paraphrase cross-encoder (`--model`, default the one
  under /tmp/xfer when present) in fp32 and int8: accuracy and F1 at the model's dev threshold, their
  change, and the share of labels that flip. Without a trained model the untrained backbone is used,
  labelled as a proxy (its accuracy means nothing, its flips still show the noise int8 adds).

Static quantization is calibrated on MSRP train pairs (never the test pairs it is scored on).
Writes benchmarks/results/score_int8.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from common import BATCH, MAX_LENGTH, RESULTS_DIR, SHARED, build_models, msrp_test_pairs, sentence_pool

RESULTS = RESULTS_DIR / "score_int8.json"
TRAINED_CROSS = Path("/tmp/xfer/models/msrp-cross")
SLICES = 8


def msrp_train_pairs(shared: Path, n: int) -> tuple[list[str], list[str]]:
    """The first n MSRP train pairs: calibration data for static int8 (never the test pairs)."""
    a, b = [], []
    lines = (shared / "msrp" / "msr_paraphrase_train.txt").read_text(encoding="utf-8-sig").splitlines()
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) == 5 and fields[3].strip() and fields[4].strip():
            a.append(fields[3].strip())
            b.append(fields[4].strip())
        if len(a) == n:
            break
    return a, b


def ours(model: Path, threads: int, precision: str, calibration: tuple[list[str], list[str]]) -> object:
    """Our predictor on ONNX Runtime: fp32, or int8 `dynamic` / `static`."""
    from simpair.runtime.int8_backend import Int8Predictor, build_int8_encoder
    from simpair.runtime.loader import load_predictor
    from simpair.runtime.onnx_backend import use_onnx

    base = load_predictor(model, device="cpu", precision="fp32")
    if precision == "fp32":
        return use_onnx(base, threads)
    mode = precision.removeprefix("int8-")
    return Int8Predictor(base, build_int8_encoder(base, threads, mode, calibration))


def speed(model: Path, threads: int, n: int, calibration: tuple[list[str], list[str]]) -> dict:
    """pairs/s of theirs and ours (fp32, int8 dynamic, int8 static), taking turns slice by slice."""
    import torch
    from sentence_transformers import CrossEncoder

    rng = np.random.default_rng(0)
    pool = sentence_pool(SHARED)
    idx_a, idx_b = rng.integers(0, len(pool), n), rng.integers(0, len(pool), n)
    text_a, text_b = [pool[i] for i in idx_a], [pool[i] for i in idx_b]
    st = CrossEncoder(str(model), device="cpu", max_length=MAX_LENGTH, local_files_only=True)
    contenders = {
        "theirs_fp32": lambda a, b: st.predict(
            list(zip(a, b, strict=True)),
            batch_size=BATCH,
            activation_fn=torch.nn.Sigmoid(),
            show_progress_bar=False,
        ),  # fmt: skip
    }
    for precision in ("fp32", "int8-per-row", "int8-dynamic", "int8-static"):
        predictor = ours(model, threads, precision, calibration)
        contenders[f"ours_{precision}"] = lambda a, b, p=predictor: p.predict(a, b, batch_size=BATCH)["score"]
    seconds = dict.fromkeys(contenders, 0.0)
    scores: dict[str, list[np.ndarray]] = {name: [] for name in contenders}
    bounds = np.linspace(0, n, SLICES + 1).astype(int)
    for k in range(SLICES):
        a, b = text_a[bounds[k] : bounds[k + 1]], text_b[bounds[k] : bounds[k + 1]]
        order = list(contenders) if k % 2 == 0 else list(reversed(contenders))
        for name in order:
            began = time.perf_counter()
            scores[name].append(np.asarray(contenders[name](a, b), dtype=np.float32))
            seconds[name] += time.perf_counter() - began
    joined = {name: np.concatenate(parts) for name, parts in scores.items()}
    reference = joined["ours_fp32"]
    out: dict = {"pairs": n, "threads": threads, "slices": SLICES, "contenders": {}}
    for name in contenders:
        diff = np.abs(joined[name] - reference)
        out["contenders"][name] = {
            "seconds": round(seconds[name], 2),
            "pairs_per_s": round(n / seconds[name], 1),
            "ratio_vs_theirs": round(seconds["theirs_fp32"] / seconds[name], 2),
            "ratio_vs_int8_dynamic": round(seconds["ours_int8-dynamic"] / seconds[name], 2),
            "max_abs_diff_vs_fp32": float(diff.max()),
            "mean_abs_diff_vs_fp32": float(diff.mean()),
        }
    return out


def invariance(model: Path, threads: int, n: int, calibration: tuple[list[str], list[str]]) -> dict:
    """Each variant's largest score change between batchings of the same pairs (64, 8, 1, shuffled)."""
    rng = np.random.default_rng(1)
    pool = sentence_pool(SHARED)
    a = [pool[i] for i in rng.integers(0, len(pool), n)]
    b = [pool[i] for i in rng.integers(0, len(pool), n)]
    order = rng.permutation(n)
    out: dict = {"pairs": n}
    reference = None
    for precision in ("fp32", "int8-per-row", "int8-dynamic", "int8-static"):
        predictor = ours(model, threads, precision, calibration)
        want = predictor.predict(a, b, batch_size=64)["score"]
        reference = want if reference is None else reference
        moved = [predictor.predict(a, b, batch_size=size)["score"] for size in (8, 1)]
        shuffled = predictor.predict([a[i] for i in order], [b[i] for i in order], batch_size=8)["score"]
        moved.append(np.empty_like(shuffled))
        moved[-1][order] = shuffled
        out[precision] = {
            "max_diff_across_batchings": float(max(np.abs(got - want).max() for got in moved)),
            "max_diff_vs_fp32": float(np.abs(want - reference).max()),
        }
    return out


def decisions(model: Path, threads: int, calibration: tuple[list[str], list[str]], proxy: bool) -> dict:
    """Accuracy / F1 at the model's threshold on MSRP test, fp32 against each int8 mode."""
    from simpair.metrics.binary_classification import binary_metrics
    from simpair.models.metadata import ModelMetadata

    text_a, text_b, gold = msrp_test_pairs(SHARED)
    threshold = float(ModelMetadata.read(model).threshold)
    out: dict = {"model": str(model), "proxy_untrained": proxy, "pairs": len(gold), "threshold": threshold}
    fp32 = ours(model, threads, "fp32", calibration).predict(text_a, text_b, batch_size=BATCH)
    reference = binary_metrics(fp32["probability"], gold, threshold)
    out["fp32"] = {k: reference[k] for k in ("accuracy", "f1", "roc_auc")}
    for mode in ("int8-per-row", "int8-dynamic", "int8-static"):
        got = ours(model, threads, mode, calibration).predict(text_a, text_b, batch_size=BATCH)
        metrics = binary_metrics(got["probability"], gold, threshold)
        out[mode] = {
            **{k: metrics[k] for k in ("accuracy", "f1", "roc_auc")},
            "delta_accuracy": metrics["accuracy"] - reference["accuracy"],
            "delta_f1": metrics["f1"] - reference["f1"],
            "label_flip_share": float(np.mean(got["label"] != fp32["label"])),
            "max_abs_score_diff": float(np.abs(got["probability"] - fp32["probability"]).max()),
            "mean_abs_score_diff": float(np.abs(got["probability"] - fp32["probability"]).mean()),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000, help="pairs for the speed measurement")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", type=Path, default=None, help="trained paraphrase cross-encoder")
    parser.add_argument("--invariance-pairs", type=int, default=300, help="pairs for batch invariance")
    parser.add_argument("--calibration", type=int, default=256, help="MSRP train pairs for static int8")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    calibration = msrp_train_pairs(SHARED, args.calibration)
    trained = args.model or (TRAINED_CROSS if (TRAINED_CROSS / "simpair.json").is_file() else None)
    with tempfile.TemporaryDirectory(prefix="bench-int8-") as tmp:
        models = build_models(Path(tmp))
        began = time.perf_counter()
        result = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(["benchmarks/score_int8.py", *sys.argv[1:]]),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "loadavg": os.getloadavg()},
            "speed_backbone_cross": speed(models["backbone-cross"], args.threads, args.pairs, calibration),
            "batch_invariance": {
                kind: invariance(models[f"backbone-{kind}"], args.threads, args.invariance_pairs, calibration)
                for kind in ("cross", "bi")
            },
            "decisions": decisions(
                trained or models["backbone-cross"], args.threads, calibration, proxy=trained is None
            ),
        }
        result["machine"]["loadavg_after"] = os.getloadavg()
        result["wall_seconds"] = round(time.perf_counter() - began, 1)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
