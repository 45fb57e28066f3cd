"""Multi-process data parallel training (torchrun / DDP) that also runs on CPU.

`torchrun --standalone --nproc-per-node N -m simpair.training --config X.yaml` (the entry point is
`simpair/training/__main__.py`) sets RANK, WORLD_SIZE and LOCAL_RANK; we join the process group with
NCCL on GPUs and gloo on CPU, so the same code path is tested on a laptop with 2 gloo processes.
Rank 0 alone evaluates, logs and saves; the others wait at barriers.

Each rank trains on its own disjoint shard of the training pairs (`shard_rows`: a seeded split of the
row indices, the same on every rank), builds its own length-grouped batches from it, and all ranks
run the step count they agree on (`agree_min`), so no rank waits on a gradient all-reduce forever.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

# How long a rank waits at a collective for the others. The ranks > 0 wait while rank 0 tokenizes
# (first run on a new dataset version) and while it evaluates on dev and saves: longer than NCCL's
# 10-minute default on a large dataset.
WAIT_LIMIT = timedelta(hours=1)


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def backend_for(device_type: str) -> str:
    """The collective backend for a device: NCCL between GPUs, gloo between CPU processes."""
    return "nccl" if device_type == "cuda" else "gloo"


def init_distributed(device_type: str) -> DistInfo:
    """Join the process group described by torchrun's environment; a no-op for one process.

    On CUDA each rank takes GPU LOCAL_RANK before joining (NCCL binds a communicator to the current
    device); more processes than GPUs on a node is an error, not a silent second rank on GPU 0.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    device_id = None
    if device_type == "cuda":
        gpus = torch.cuda.device_count()
        if local_rank >= gpus:
            raise RuntimeError(
                f"rank {rank} has LOCAL_RANK {local_rank} but this node has {gpus} GPU(s): "
                "start at most one process per GPU (torchrun --nproc-per-node <= GPUs)"
            )
        torch.cuda.set_device(local_rank)
        device_id = torch.device("cuda", local_rank)
    if not dist.is_initialized():
        dist.init_process_group(
            backend=backend_for(device_type),
            rank=rank,
            world_size=world,
            device_id=device_id,
            timeout=WAIT_LIMIT,
        )
    return DistInfo(rank, world, local_rank)


def shutdown_distributed() -> None:
    """Leave the process group (at the end of a torchrun process), if one was joined."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def broadcast_object(value: Any, info: DistInfo) -> Any:
    """Rank 0's value on every rank (output directory, early-stop decision)."""
    if not info.enabled:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_objects(value: Any, info: DistInfo) -> list[Any]:
    """Every rank's value, in rank order, on every rank."""
    if not info.enabled:
        return [value]
    values: list[Any] = [None] * info.world_size
    dist.all_gather_object(values, value)
    return values


def agree_min(value: int, info: DistInfo) -> int:
    """The smallest of every rank's value (the steps all ranks can take together)."""
    return min(gather_objects(int(value), info))


def shard_rows(n: int, seed: int, info: DistInfo) -> np.ndarray:
    """This rank's rows of n, sorted: a seeded split, identical on every rank, disjoint, covering all.

    One process keeps every row in order (training exactly as without DDP).
    """
    if not info.enabled:
        return np.arange(n, dtype=np.int64)
    perm = np.random.default_rng([seed, 104729]).permutation(n)
    return np.sort(perm[info.rank :: info.world_size])
