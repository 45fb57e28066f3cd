"""DDP: the real torchrun entry point, 2 CPU processes with the gloo backend, stays in sync."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_training_toydata import write_toy_home

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_torchrun_two_gloo_processes_train_in_sync(home: Path, tmp_path: Path) -> None:
    write_toy_home(home)
    out_dir = tmp_path / "ddp-model"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "simpair.training",
        "--config",
        str(REPO / "configs" / "smoke-paraphrase.yaml"),
        "--home",
        str(home),
        "--set",
        f"output_dir={out_dir}",
        "--set",
        "progress=false",
        "--set",
        "max_steps=3",
        "--set",
        "num_threads=1",
        "--set",
        "device=cpu",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    by_rank = {line["rank"]: line for line in lines}
    assert set(by_rank) == {0, 1}
    # Gradients were all-reduced: both ranks end with bit-identical weights.
    assert by_rank[0]["final_weights_sha1"] == by_rank[1]["final_weights_sha1"]
    assert by_rank[0]["model_dir"] == by_rank[1]["model_dir"] == str(out_dir)
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["steps"] == 3
    assert (out_dir / "model.safetensors").exists() and not list(tmp_path.glob(".ddp-model.tmp-*"))
