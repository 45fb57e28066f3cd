"""What several benchmarks share: where things are, the MSRP sentences and pairs, the backbone saved as ours.

Each benchmark is run as a script (`python benchmarks/NAME.py`), so this folder is first on its import
path and `import common` finds this file. Scripts that measure the same models on the same pairs take
them from here rather than from one another, so their numbers stay comparable (batch 64, max length 128,
pairs drawn from the same pool with the same seed); tests/test_layout.py checks that the benchmarks'
imports form no circle and that only this file touches `sys.path`.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
SHARED = ROOT.parent / "shared" / "data"
MAX_LENGTH = 128
BATCH = 64

# A copy of the checkout that was never pip-installed (a GPU machine given the tree) still finds simpair.
if importlib.util.find_spec("simpair") is None:
    sys.path.insert(0, str(ROOT))


def msrp_test_pairs(shared: Path) -> tuple[list[str], list[str], np.ndarray]:
    """MSRP test pairs with gold labels (quoting off: quotes are text; the file starts with a BOM)."""
    a, b, labels = [], [], []
    for line in (
        (shared / "msrp" / "msr_paraphrase_test.txt").read_text(encoding="utf-8-sig").splitlines()[1:]
    ):
        fields = line.split("\t")
        if len(fields) == 5 and fields[3].strip() and fields[4].strip():
            labels.append(int(fields[0]))
            a.append(fields[3].strip())
            b.append(fields[4].strip())
    return a, b, np.asarray(labels, dtype=np.int8)


def sentence_pool(shared: Path) -> list[str]:
    """MSRP sentences (quoting off: quotes are text), de-duplicated, in file order."""
    seen: dict[str, None] = {}
    for name in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"):
        lines = (shared / "msrp" / name).read_text(encoding="utf-8-sig").splitlines()[1:]
        for line in lines:
            fields = line.split("\t")
            if len(fields) == 5:
                for text in fields[3:5]:
                    if text.strip():
                        seen.setdefault(text.strip(), None)
    return list(seen)


def stsb_sentences(shared: Path) -> list[str]:
    """STS-B sentences of every split (tab-separated, quoting off; some lines carry extra fields)."""
    out: list[str] = []
    for name in ("sts-train.csv", "sts-dev.csv", "sts-test.csv"):
        for line in (shared / "stsb" / name).read_text(encoding="utf-8-sig").splitlines():
            fields = line.split("\t")
            if len(fields) >= 7:
                out += [t.strip() for t in fields[5:7] if t.strip()]
    return out


def write_pairs(pool: list[str], n: int, path: Path, seed: int = 0) -> float:
    """n random pairs from the pool as a Parquet batch; returns the distinct-sentence share."""
    rng = np.random.default_rng(seed)
    idx_a, idx_b = rng.integers(0, len(pool), n), rng.integers(0, len(pool), n)
    schema = pa.schema([("pair_id", pa.string()), ("text_a", pa.string()), ("text_b", pa.string())])
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, n, 100_000):
            a, b = idx_a[start : start + 100_000], idx_b[start : start + 100_000]
            writer.write_table(
                pa.table(
                    {
                        "pair_id": [f"g{i:08d}" for i in range(start, start + len(a))],
                        "text_a": [pool[i] for i in a],
                        "text_b": [pool[i] for i in b],
                    }
                ),
                row_group_size=65_536,
            )
    return float(len(np.union1d(idx_a, idx_b)) / (2 * n))


def save_backbone(kind: str, work: Path) -> Path:
    """The bundled backbone saved as our cross-encoder (paraphrase, seeded head) or bi-encoder (STS)."""
    import torch

    from simpair.models import ModelMetadata, build_model, default_backbone, save_model
    from simpair.models.tokenizer import load_tokenizer

    task, objective = {"cross": ("paraphrase", "bce"), "bi": ("sts", "cosent")}[kind]
    backbone = default_backbone()
    torch.manual_seed(0)  # the cross-encoder's classification head is new: seed it
    meta = ModelMetadata(kind=kind, task=task, objective=objective, max_length=MAX_LENGTH, backbone=backbone)
    return save_model(build_model(kind, backbone), load_tokenizer(backbone), work / f"backbone-{kind}", meta)


def build_models(work: Path) -> dict[str, Path]:
    """The backbone saved as our cross- and bi-encoder, plus the tiny cross-encoder."""
    from simpair.models import save_tiny_model

    out = {f"backbone-{kind}": save_backbone(kind, work) for kind in ("cross", "bi")}
    out["tiny-cross"] = save_tiny_model(work / "tiny-cross", task="paraphrase", kind="cross")
    return out


def machine_facts() -> dict[str, str]:
    """What a result file records of the machine it was measured on: architecture, CPUs, Python, CPU model."""
    cpuinfo = Path("/proc/cpuinfo")
    names = (
        [line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        if cpuinfo.exists()
        else []
    )
    return {
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "cpu": names[0].split(":", 1)[1].strip() if names else "unknown",
    }
