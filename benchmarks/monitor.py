"""Traffic monitoring: a profile's cost against scoring, and whether the default rule holds on real data.

Run by hand (niced where the machine is shared; the recorded runs were not):

    nice -n 10 .venv/bin/python benchmarks/monitor.py cost     # profile cost and memory at 100k and 1M pairs
    nice -n 10 .venv/bin/python benchmarks/monitor.py real     # MSRP/STS-B test as traffic, 3 moved batches
    nice -n 10 .venv/bin/python benchmarks/monitor.py real --calibrate   # dev/other splits only (no test)

`cost`: each size in a fresh subprocess (peak RSS is that process's alone). Pairs are drawn from the
MSRP sentence pool (`common.sentence_pool`) chunk by chunk (10k pairs, as scoring chunks), so the
process holds one chunk at a time and the growth from 100k to 1M is the builder's own. The builder
tokenizes with the bundled backbone's fast tokenizer (max length 128) and, as a bi-encoder's traffic
profile does, embeds its 512 sampled texts at the end. Scoring time is measured on the first
`--score-pairs` pairs with the backbone bi- and cross-encoder (torch, batch 64) and scaled to 100k
pairs (scoring is linear in pairs; 100k pairs take ~20 minutes on 2 cores).

`real`: the bundled backbone, untrained (all-MiniLM-L6-v2 as a bi-encoder, mean pooling, cosine),
stands for the model. References: MSRP on a fixed 1,500-pair sample of its train file (MSRP has no
dev split), STS-B on its dev split. Traffic: 1,500 pairs of the rest of MSRP train and of STS-B train
(what the defaults were set on; `--calibrate` runs these alone), the test splits (no alarm expected)
and three moved batches of `--moved-pairs` (600) pairs drawn from the test split (the other split under
`--calibrate`): another domain (pairs of first sentences of numpy's, scipy's and scikit-learn's
docstrings: technical prose), texts three times longer (each text joined with two others of its
split), and another model's scores (the same pairs scored by the backbone cut to its first 2 of 6
layers). Each distinct sentence is embedded once per model for the whole run (`CachedBi`). Writes
`benchmarks/results/monitor_cost.json`, `monitor_calibrate.json` and `monitor_real.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from common import MAX_LENGTH, RESULTS_DIR, SHARED, save_backbone, sentence_pool

CHUNK = 10_000


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _machine() -> str:
    load = os.getloadavg()[0]
    return f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, load {load:.1f}"


# ------------------------------------------------------------------------------------------ cost
def worker_profile(pairs: int, model_dir: Path, seed: int = 0) -> dict:
    """Profile `pairs` random pool pairs chunk by chunk; time and peak RSS of this process."""
    from simpair.models.tokenizer import load_tokenizer
    from simpair.monitoring.profile import ProfileBuilder
    from simpair.runtime.loader import load_predictor

    pool = sentence_pool(SHARED)
    predictor = load_predictor(model_dir)
    tok = load_tokenizer(model_dir)
    rng = np.random.default_rng(seed)
    base = _peak_mb()
    builder = ProfileBuilder(tok, MAX_LENGTH, "bi", 0.5, "traffic", model="backbone", version="1")
    t_build = 0.0
    for start in range(0, pairs, CHUNK):
        n = min(CHUNK, pairs - start)
        a = [pool[i] for i in rng.integers(0, len(pool), n)]
        b = [pool[i] for i in rng.integers(0, len(pool), n)]
        scores = rng.random(n)
        t0 = time.perf_counter()
        builder.add(a, b, scores)
        t_build += time.perf_counter() - t0
    t0 = time.perf_counter()
    profile = builder.finish(embed=lambda texts: predictor.embed(texts, batch_size=64))
    t_embed = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        profile.save(tmp)
        t_save = time.perf_counter() - t0
    return {
        "pairs": pairs, "build_s": t_build, "embed_sample_s": t_embed, "save_s": t_save,
        "total_s": t_build + t_embed + t_save, "peak_rss_mb": _peak_mb(), "rss_before_mb": base,
        "vectors": len(profile.vectors) if profile.vectors is not None else 0,
    }  # fmt: skip


def worker_score(pairs: int, model_dir: Path, seed: int = 0) -> dict:
    """Pairs/s of the model's own `predict` on `pairs` pool pairs (model load excluded)."""
    from simpair.runtime.loader import load_predictor

    pool = sentence_pool(SHARED)
    rng = np.random.default_rng(seed)
    a = [pool[i] for i in rng.integers(0, len(pool), pairs)]
    b = [pool[i] for i in rng.integers(0, len(pool), pairs)]
    predictor = load_predictor(model_dir)
    t0 = time.perf_counter()
    predictor.predict(a, b, batch_size=64)
    took = time.perf_counter() - t0
    return {"pairs": pairs, "seconds": took, "pairs_per_s": pairs / took}


def run_worker(args: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "worker", *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def cost_main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="monitor-bench-"))
    models = {kind: save_backbone(kind, work) for kind in ("bi", "cross")}
    scoring = {kind: run_worker(["score", str(args.score_pairs), str(models[kind])]) for kind in models}
    growth = [run_worker(["profile", str(n), str(models["bi"])]) for n in args.sizes]
    for row in growth:
        row["per_100k_s"] = row["build_s"] / row["pairs"] * 100_000
    at_100k = next((g for g in growth if g["pairs"] == 100_000), growth[0])
    profile_100k = (
        at_100k["build_s"] / at_100k["pairs"] * 100_000 + at_100k["embed_sample_s"] + at_100k["save_s"]
    )
    share = {kind: profile_100k / (100_000 / s["pairs_per_s"]) for kind, s in scoring.items()}
    result = {
        "date": datetime.now(UTC).date().isoformat(), "machine": _machine(),
        "command": ".venv/bin/python benchmarks/monitor.py cost",
        "scoring": scoring, "growth": growth, "profile_at_100k_s": profile_100k,
        "profile_share_of_scoring_at_100k": share,
    }  # fmt: skip
    (RESULTS_DIR / "monitor_cost.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


# ------------------------------------------------------------------------------------------ real
def _msrp(name: str) -> tuple[list[str], list[str]]:
    a, b = [], []
    for line in (SHARED / "msrp" / name).read_text(encoding="utf-8-sig").splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) == 5 and fields[3].strip() and fields[4].strip():
            a.append(fields[3].strip())
            b.append(fields[4].strip())
    return a, b


def _stsb(name: str) -> tuple[list[str], list[str]]:
    a, b = [], []
    for line in (SHARED / "stsb" / name).read_text(encoding="utf-8-sig").splitlines():
        fields = line.split("\t")
        if len(fields) >= 7 and fields[5].strip() and fields[6].strip():
            a.append(fields[5].strip())
            b.append(fields[6].strip())
    return a, b


def docstring_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Pairs of first sentences of the docstrings of numpy's, scipy's and scikit-learn's public names."""
    import inspect

    import numpy
    import scipy.linalg
    import scipy.stats
    import sklearn.cluster
    import sklearn.decomposition
    import sklearn.linear_model
    import sklearn.preprocessing

    sentences: dict[str, None] = {}
    for module in (numpy, numpy.linalg, scipy.linalg, scipy.stats, sklearn.cluster,
                   sklearn.decomposition, sklearn.linear_model, sklearn.preprocessing):  # fmt: skip
        for name in dir(module):
            doc = inspect.getdoc(getattr(module, name, None)) if not name.startswith("_") else None
            first = " ".join((doc or "").split("\n\n")[0].split())
            if 30 <= len(first) <= 200:
                sentences.setdefault(first, None)
    pool = list(sentences)
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(pool), size=(n, 2), replace=len(pool) < 2 * n)
    return [pool[i] for i in idx[:, 0]], [pool[i] for i in idx[:, 1]]


def three_times_longer(a: list[str], b: list[str], seed: int = 0) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    texts = a + b
    pick = rng.integers(0, len(texts), size=(len(a), 4))
    longer_a = [f"{x} {texts[p[0]]} {texts[p[1]]}" for x, p in zip(a, pick, strict=True)]
    longer_b = [f"{y} {texts[p[2]]} {texts[p[3]]}" for y, p in zip(b, pick, strict=True)]
    return longer_a, longer_b


class CachedBi:
    """A bi-encoder predictor that embeds each distinct sentence once for the whole benchmark.

    Scores are the predictor's own (`from_raw` of the cosines), as its `predict` gives them; the
    cache only spares the shared machine the same sentence embedded for the threshold, the
    reference, every traffic case and the vector sample.
    """

    kind = "bi"

    def __init__(self, predictor) -> None:  # noqa: ANN001
        self.p, self.cache = predictor, {}
        self.tokenizer, self.max_length, self.threshold = predictor.tokenizer, predictor.max_length, 0.5

    def embed(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            self.cache.update(zip(new, self.p.embed(new, batch_size=batch_size), strict=True))
        return np.stack([self.cache[t] for t in texts])

    def predict(self, a: list[str], b: list[str], batch_size: int = 64) -> dict[str, np.ndarray]:
        cos = np.einsum("ij,ij->i", self.embed(a, batch_size), self.embed(b, batch_size)).astype(np.float32)
        return self.p.from_raw(cos)


def _traffic(model: CachedBi, pairs, threshold: float):  # noqa: ANN001, ANN202
    """Traffic profile of `pairs` as a scoring run builds it (chunks, sampled texts embedded at the end)."""
    from simpair.monitoring.profile import ProfileBuilder

    a, b = pairs
    builder = ProfileBuilder(model.tokenizer, model.max_length, "bi", threshold, "traffic", "backbone", "1")
    for start in range(0, len(a), 1000):
        sa, sb = a[start : start + 1000], b[start : start + 1000]
        builder.add(sa, sb, model.predict(sa, sb)["score"])
    profile = builder.finish(embed=model.embed)
    profile.run_id = "traffic"
    profile.health = {"rows_in": float(len(a)), "rejected": 0.0, "quarantined": 0.0, "duplicates": 0.0}
    return profile


def _sample(pairs: tuple[list[str], list[str]], n: int, seed: int) -> tuple[list[str], list[str]]:
    if len(pairs[0]) <= n:
        return pairs
    pick = np.random.default_rng(seed).choice(len(pairs[0]), n, replace=False)
    return [pairs[0][i] for i in pick], [pairs[1][i] for i in pick]


def real_main(args: argparse.Namespace) -> None:
    import polars as pl
    import torch

    from simpair.metrics.binary_classification import best_threshold
    from simpair.monitoring.drift import compare
    from simpair.monitoring.policy import MonitorPolicy
    from simpair.monitoring.profile import reference_profile
    from simpair.runtime.loader import load_predictor

    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="monitor-real-"))
    model_dir = save_backbone("bi", work)
    model = CachedBi(load_predictor(model_dir))
    smaller_p = load_predictor(model_dir)
    smaller_p.model.model.encoder.layer = smaller_p.model.model.encoder.layer[:2]  # "another model"
    smaller = CachedBi(smaller_p)
    policy = MonitorPolicy()
    labels, ta, tb = [], [], []
    for line in (
        (SHARED / "msrp" / "msr_paraphrase_train.txt").read_text(encoding="utf-8-sig").splitlines()[1:]
    ):
        fields = line.split("\t")
        if len(fields) == 5 and fields[3].strip() and fields[4].strip():
            labels.append(int(fields[0]))
            ta.append(fields[3].strip())
            tb.append(fields[4].strip())
    order = np.random.default_rng(0).permutation(len(ta))
    dev_idx, other_idx = order[:1500], order[1500:]
    dev = ([ta[i] for i in dev_idx], [tb[i] for i in dev_idx])
    msrp_threshold = best_threshold(model.predict(*dev)["score"], np.asarray(labels)[dev_idx])
    setups = {
        "msrp": (dev, msrp_threshold, ([ta[i] for i in other_idx], [tb[i] for i in other_idx]),
                 _msrp("msr_paraphrase_test.txt")),
        "stsb": (_stsb("sts-dev.csv"), 0.5, _stsb("sts-train.csv"), _stsb("sts-test.csv")),
    }  # fmt: skip
    rows = []
    for name, (dev_pairs, threshold, other, test) in setups.items():
        ref = reference_profile(
            model, pl.DataFrame({"text_a": dev_pairs[0], "text_b": dev_pairs[1]}), threshold
        )
        moved_from = _sample(other if args.calibrate else test, args.moved_pairs, seed=2)
        cases = {
            "other split (calibration)": (_sample(other, 1500, seed=1), model, False),
            "test split": (test, model, False),
            "another domain (library docstrings)": (
                docstring_pairs(args.moved_pairs, seed=len(name)),
                model,
                True,
            ),
            "texts 3x longer": (three_times_longer(*moved_from), model, True),
            "another model's scores (2 of 6 layers)": (moved_from, smaller, True),
        }
        if args.calibrate:
            del cases["test split"]
        for case, (pairs, scorer, expect) in cases.items():
            report = compare(_traffic(scorer, pairs, threshold), ref, [], policy)
            values = {
                f"{r.statistic}.{r.test}": round(r.value, 4) for r in report.rows if r.against == "reference"
            }
            rows.append({
                "reference": f"{name} {'train sample' if name == 'msrp' else 'dev'}", "traffic": case,
                "pairs": len(pairs[0]), "expected_alarm": expect,
                "alarms": [f"{r.statistic}.{r.test}" for r in report.alarms], "values": values,
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    result = {
        "date": datetime.now(UTC).date().isoformat(), "machine": _machine(),
        "command": f".venv/bin/python benchmarks/monitor.py real{' --calibrate' * args.calibrate}",
        "model": "bundled backbone all-MiniLM-L6-v2, untrained, as a bi-encoder (max length 128)",
        "msrp_threshold": msrp_threshold, "policy": policy.model_dump(), "rows": rows,
        "all_as_expected": all(bool(r["alarms"]) == r["expected_alarm"] for r in rows),
    }  # fmt: skip
    out = RESULTS_DIR / ("monitor_calibrate.json" if args.calibrate else "monitor_real.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        what, n, model = sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
        print(json.dumps((worker_profile if what == "profile" else worker_score)(n, model)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    cost = sub.add_parser("cost")
    cost.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    cost.add_argument("--score-pairs", type=int, default=2_000)
    real = sub.add_parser("real")
    real.add_argument(
        "--calibrate", action="store_true", help="dev and other splits only: where defaults are set"
    )
    real.add_argument("--moved-pairs", type=int, default=600, help="pairs in each moved batch")
    real.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    cost_main(args) if args.what == "cost" else real_main(args)


if __name__ == "__main__":
    main()
