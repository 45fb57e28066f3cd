"""DDP: the documented torchrun command, 2 CPU processes with the gloo backend, for every model kind."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_training_toydata import write_toy_home

from simpair.models import device as devices
from simpair.training.ddp import DistInfo, backend_for, shard_rows

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = Path(sys.executable).with_name("torchrun")


def launcher() -> list[str]:
    """The `torchrun` the docs name (installed beside this interpreter), else its module form."""
    if TORCHRUN.is_file():
        return [str(TORCHRUN)]
    return [sys.executable, "-m", "torch.distributed.run"]


# (smoke config, extra overrides): the cls cross-encoder reads BERT's pooler; the bi-encoder (mean
# pooling) and the segment-cosine cross-encoder do not, which used to fail DDP on step 1. The
# bi-encoder trains on two splits at once (a training set of two cache files).
KINDS = {
    "cross-cls": ("smoke-paraphrase.yaml", []),
    "bi": (
        "smoke-sts.yaml",
        ["train=[{dataset: stsb, split: train}, {dataset: msrp, split: train}]", "max_train_samples=80"],
    ),
    "cross-segment-cosine": ("smoke-paraphrase.yaml", ["cross_head=segment_cosine"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_torchrun_two_gloo_processes_train_in_sync(kind: str, home: Path, tmp_path: Path) -> None:
    config, extra = KINDS[kind]
    write_toy_home(home)
    out_dir = tmp_path / "ddp-model"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    overrides = [f"output_dir={out_dir}", "progress=false", "max_steps=3", "num_threads=1", *extra]
    # The command as docs/training.md writes it; `device` stays auto (no GPU here: CPU and gloo).
    cmd = [
        *launcher(),
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "simpair.training",
        "--config",
        str(REPO / "configs" / config),
        "--home",
        str(home),
    ]
    for item in overrides:
        cmd += ["--set", item]
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
    native = devices.native_bf16(torch.device("cpu"))  # auto trains in bf16 where it is native
    assert metrics["device"] == "cpu" and metrics["autocast"] == ("torch.bfloat16" if native else "fp32")
    assert (out_dir / "model.safetensors").exists() and not list(tmp_path.glob(".ddp-model.tmp-*"))
    assert "Expected to have finished reduction" not in proc.stderr
    # Each rank read its own disjoint half of the training pairs, together all of them.
    lines = (out_dir / "train_pairs.txt").read_text().splitlines()
    assert len(lines) == metrics["train_pairs"]
    if kind == "bi":
        assert metrics["train_pairs_by_dataset"].keys() == {"msrp", "stsb"}
    halves = [[lines[i] for i in shard_rows(len(lines), 42, DistInfo(rank, 2))] for rank in (0, 1)]
    assert sorted(halves[0] + halves[1]) == sorted(lines) and abs(len(halves[0]) - len(halves[1])) <= 1
    for shard, mine in zip(metrics["ddp_shards"], halves, strict=True):
        assert shard["pairs"] == len(mine)
        assert shard["sha1"] == hashlib.sha1(("\n".join(mine) + "\n").encode()).hexdigest()
    # The pooler is still saved (same weights file as before); where the model never reads it, it
    # stayed frozen: equal to the tiny model's initial weights (seed 42, the smoke configs' seed).
    from safetensors.torch import load_file

    from simpair.models.tiny import build_tiny

    saved = {k: v for k, v in load_file(str(out_dir / "model.safetensors")).items() if ".pooler." in f".{k}"}
    assert saved
    if kind != "cross-cls":
        head = "segment_cosine" if kind == "cross-segment-cosine" else "cls"
        initial, _ = build_tiny("bi" if kind == "bi" else "cross", seed=42, cross_head=head)
        for name, value in initial.model.state_dict().items():
            if name in saved:
                assert torch.equal(saved[name], value), name


def test_backend_follows_the_device() -> None:
    assert backend_for("cuda") == "nccl"
    assert backend_for("cpu") == "gloo"


def test_one_process_needs_no_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    from simpair.training.ddp import init_distributed

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    info = init_distributed("cuda")
    assert not info.enabled and info.is_main
    assert not torch.distributed.is_initialized()


def test_more_processes_than_gpus_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from simpair.training.ddp import init_distributed

    gpus = torch.cuda.device_count()
    monkeypatch.setenv("WORLD_SIZE", str(gpus + 2))
    monkeypatch.setenv("RANK", str(gpus))
    monkeypatch.setenv("LOCAL_RANK", str(gpus))
    with pytest.raises(RuntimeError, match="one process per GPU"):
        init_distributed("cuda")


@pytest.mark.parametrize(
    ("kind", "head"),
    [("cross", "cls"), ("cross", "segment_cosine"), ("bi", "cls")],
    ids=["cls", "segcos", "bi"],
)
@pytest.mark.parametrize("frozen_first", [False, True], ids=["trainable", "after-warm-up"])
def test_every_trainable_parameter_gets_a_gradient(kind: str, head: str, frozen_first: bool) -> None:
    """What DDP without find_unused_parameters needs: no trainable parameter left without a gradient.

    Bi-encoders and the segment-cosine head never read BERT's pooler, so it is frozen; unfreezing the
    encoder after a frozen warm-up must not bring it back.
    """
    from simpair.losses import build_objective
    from simpair.models.tiny import build_tiny
    from simpair.training.loop import TrainModule

    model, tokenizer = build_tiny(kind, seed=0, cross_head=head)
    if frozen_first:
        model.set_encoder_trainable(False)
    model.set_encoder_trainable(True)
    objective = build_objective("bce" if kind == "cross" else "cosent", hidden_size=32)
    module = TrainModule(model, objective)
    a, b = ["a cat sat on the mat", "dogs run"], ["the cat sat", "a dog is running fast"]
    if kind == "cross":
        enc = tokenizer(a, b, padding=True, return_tensors="pt")
        batch = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    else:
        ea, eb = (
            tokenizer(a, padding=True, return_tensors="pt"),
            tokenizer(b, padding=True, return_tensors="pt"),
        )
        batch = {
            "a_input_ids": ea["input_ids"],
            "a_attention_mask": ea["attention_mask"],
            "b_input_ids": eb["input_ids"],
            "b_attention_mask": eb["attention_mask"],
        }
    batch["targets"] = torch.tensor([1.0, 0.0])
    module(batch).backward()
    missing = [n for n, p in module.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == []
    pooler = [n for n, p in module.named_parameters() if ".pooler." in n]
    assert pooler  # still built and saved: the weights file keeps its format
    trainable_pooler = [n for n, p in module.named_parameters() if ".pooler." in n and p.requires_grad]
    assert bool(trainable_pooler) == (head == "cls" and kind == "cross")
