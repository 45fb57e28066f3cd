"""`python -m simpair.training --config X.yaml [--home H] [--set k=v ...]`, the torchrun entry point.

    torchrun --standalone --nproc-per-node 2 -m simpair.training --config configs/msrp-cross.yaml

Every process runs the same training (DDP: NCCL on GPUs, gloo on CPU, chosen from the device); rank 0
saves the model. Each rank prints one JSON line: its rank, the model directory and the sha1 of its
final weights (equal on every rank), and rank 0 the dev metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from simpair import settings
from simpair.training import train
from simpair.training.config import load_train_config, parse_overrides
from simpair.training.ddp import shutdown_distributed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m simpair.training", description=__doc__)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    config = load_train_config(args.config, parse_overrides(args.overrides))
    result = train(config, settings.home_dir(args.home))
    shutdown_distributed()  # on an error torchrun stops every rank; leaving cleanly is for success
    rank = int(os.environ.get("RANK", "0"))
    line = {"rank": rank, "model_dir": str(result.model_dir), "final_weights_sha1": result.final_weights_sha1}
    if rank == 0:
        line["dev"] = result.metrics.get("dev", {})
    # One write() per rank: ranks share the launcher's stdout pipe, and print() writes the text and
    # its newline separately, so two ranks' lines could interleave (seen in CI). A single write of
    # under PIPE_BUF bytes to a pipe is atomic.
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
