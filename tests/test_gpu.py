"""GPU code paths: CUDA tests that skip without a GPU, and the device and precision rules, checked on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from test_training_toydata import write_toy_home

from simpair.models import device as devices
from simpair.models.tiny import save_tiny_model
from simpair.runtime.loader import load_predictor

REPO = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device")
PAIRS = (
    ["A cat sat on the mat.", "Stocks fell sharply.", "He plays the guitar.", "Rain is expected today."],
    ["The cat was sitting on the mat.", "Markets dropped.", "She is cooking dinner.", "It will rain today."],
)


# ---------------------------------------------------------------- rules, on any machine
def test_auto_trains_in_bf16_on_cuda_with_bf16_and_fp32_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert devices.autocast_dtype(cuda, "auto") is torch.bfloat16
    assert devices.autocast_dtype(cuda, "fp32") is None
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # e.g. a V100
    assert devices.autocast_dtype(cuda, "auto") is None
    assert devices.autocast_dtype(torch.device("cpu"), "auto") is None


def test_auto_trains_in_bf16_wherever_bf16_is_native_but_predicts_in_fp32_on_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpu = torch.device("cpu")
    for native in (True, False):  # an AVX512-BF16 / AMX CPU, then an AVX2 one
        monkeypatch.setattr(devices, "native_bf16", lambda device, native=native: native)
        assert devices.training_dtype(cpu, "auto") is (torch.bfloat16 if native else None)
        assert devices.training_dtype(cpu, "fp32") is None
        assert devices.autocast_dtype(cpu, "auto") is None  # scores and metrics stay fp32 on CPU


def test_prediction_defaults_to_fp32_for_metrics_and_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evaluation, the gate and the pyfunc call `load_predictor(dir)`: fp32 unless bf16 is asked."""
    from simpair.models import predictor as predictor_module

    asked: list[str] = []
    real = predictor_module.autocast_dtype

    def spy(device: torch.device, precision: str = "auto") -> torch.dtype | None:
        asked.append(precision)
        return real(device, precision)

    monkeypatch.setattr(predictor_module, "autocast_dtype", spy)
    model_dir = save_tiny_model(tmp_path / "m", "sts", "bi")
    assert load_predictor(model_dir)._dtype is None
    assert asked == ["fp32"]
    load_predictor(model_dir, precision="bf16" if devices.native_bf16(torch.device("cpu")) else "fp32")


@pytest.mark.skipif(CUDA, reason="checks the message shown where there is no CUDA device")
def test_asking_for_cuda_without_one_says_so() -> None:
    with pytest.raises(RuntimeError, match="no CUDA device"):
        devices.pick_device("cuda")


# ---------------------------------------------------------------- on a GPU
@needs_cuda
@pytest.mark.parametrize("config", ["smoke-sts.yaml", "smoke-paraphrase.yaml"])
def test_training_on_cuda_uses_bf16_autocast_and_saves_fp32(config: str, home: Path) -> None:
    from safetensors import safe_open

    from simpair.training import train
    from simpair.training.config import load_train_config

    write_toy_home(home)
    result = train(load_train_config(REPO / "configs" / config, {"progress": False}), home)
    metrics = result.metrics
    assert metrics["device"].startswith("cuda")
    expected = "torch.bfloat16" if torch.cuda.is_bf16_supported() else "fp32"
    assert metrics["autocast"] == expected
    assert np.isfinite(result.history[-1]["train_loss"])
    with safe_open(str(result.model_dir / "model.safetensors"), "pt") as weights:
        assert {weights.get_tensor(k).dtype for k in weights.keys()} == {torch.float32}  # noqa: SIM118


@needs_cuda
@pytest.mark.parametrize(("task", "kind"), [("paraphrase", "cross"), ("sts", "bi")])
def test_predictor_on_cuda_matches_cpu(task: str, kind: str, tmp_path: Path) -> None:
    model_dir = save_tiny_model(tmp_path / "m", task, kind)
    cpu = load_predictor(model_dir, device="cpu").predict_raw(*PAIRS)
    gpu = load_predictor(model_dir)  # auto: the GPU, fp32 by default
    assert gpu.device.type == "cuda" and gpu._dtype is None
    np.testing.assert_allclose(gpu.predict_raw(*PAIRS), cpu, atol=1e-4)
    if torch.cuda.is_bf16_supported():  # the opt-in bulk-scoring precision stays close
        bf16 = load_predictor(model_dir, precision="bf16").predict_raw(*PAIRS)
        np.testing.assert_allclose(bf16, cpu, atol=0.05)


NCCL_STEP = textwrap.dedent(
    """
    import json, torch, torch.distributed as dist
    from simpair.losses import build_objective
    from simpair.models.tiny import build_tiny
    from simpair.training.ddp import backend_for, broadcast_object, init_distributed, shutdown_distributed
    from simpair.training.loop import TrainModule

    info = init_distributed("cuda")
    if not info.enabled:  # one GPU: a one-process group still runs NCCL's collectives
        torch.cuda.set_device(0)
        dist.init_process_group(backend_for("cuda"), rank=0, world_size=1, device_id=torch.device("cuda", 0))
    device = torch.device("cuda", info.local_rank)
    model, tok = build_tiny("bi", seed=0)
    module = TrainModule(model, build_objective("cosent", hidden_size=32)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(module, device_ids=[info.local_rank])
    a = tok(["a cat sat", "dogs run"], padding=True, return_tensors="pt")
    b = tok(["the cat sat down", "a dog is running"], padding=True, return_tensors="pt")
    batch = {"a_input_ids": a["input_ids"], "a_attention_mask": a["attention_mask"],
             "b_input_ids": b["input_ids"], "b_attention_mask": b["attention_mask"],
             "targets": torch.tensor([1.0, 0.2])}
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = ddp(batch)
    loss.backward()
    rank0 = broadcast_object(info.rank, info)
    line = {"backend": dist.get_backend(), "loss": float(loss.detach()), "from_rank0": rank0}
    print(json.dumps(line))
    shutdown_distributed()
    """
)


@needs_cuda
def test_ddp_runs_over_nccl_on_cuda(tmp_path: Path) -> None:
    """A bi-encoder DDP step under bf16 autocast with the NCCL backend (one process per GPU, up to 2)."""
    script = tmp_path / "nccl_step.py"
    script.write_text(NCCL_STEP)
    procs = min(2, torch.cuda.device_count())
    torchrun = Path(sys.executable).with_name("torchrun")
    launch = [str(torchrun)] if torchrun.is_file() else [sys.executable, "-m", "torch.distributed.run"]
    cmd = [*launch, "--standalone", "--nproc-per-node", str(procs), str(script)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == procs
    assert all(line["backend"] == "nccl" and np.isfinite(line["loss"]) for line in lines)
