"""Multi-process data parallel training (torchrun / DDP) that also runs on CPU.

`torchrun --nproc-per-node N -m simpair.cli train ...` sets RANK, WORLD_SIZE and LOCAL_RANK; we join
the process group with NCCL on GPUs and gloo on CPU, so the same code path is tested on a laptop with
2 gloo processes. Rank 0 alone evaluates, logs and saves; the others wait at barriers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


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


def init_distributed(device_type: str) -> DistInfo:
    """Join the process group described by torchrun's environment; a no-op for one process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    return DistInfo(rank, world, local_rank)


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


def shard_batches(batches: list[Any], info: DistInfo) -> list[Any]:
    """Each rank's share of the (identically shuffled) batches; trailing ones are dropped to even out."""
    if not info.enabled:
        return batches
    usable = len(batches) - len(batches) % info.world_size
    return batches[info.rank : usable : info.world_size]
