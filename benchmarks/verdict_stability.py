"""Does one model get one precision verdict? `simpair models verdict MODEL --force`, N fresh processes.

Run by hand, niced (the machine is shared):

    nice -n 5 .venv/bin/python benchmarks/verdict_stability.py --home HOME --model DIR --times 10

Each measurement is the command a user (or a registration) runs, in a fresh process: the precision
ladder on the model's dev split (fp32, bf16 where native, int8), each rung checked for flips, metric
change and batch invariance, and timed against fp32 in interleaved rounds. After each, the stored
verdict is read back: the precision `--precision auto` would choose and every rung's status and
speed-up (median and the lower quartile the 1.1x rule judges). The result says how many of the N
choose the same precision, how close each rung's lower quartile came to 1.1x, and the machine's
load average around each measurement (the machine is shared, so load comes and goes between them).

Writes benchmarks/results/verdict_stability.json (one entry per model).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from common import RESULTS_DIR, ROOT, machine_facts

RESULTS = RESULTS_DIR / "verdict_stability.json"
SIMPAIR = ROOT / ".venv" / "bin" / "simpair"


def one(model: Path, home: Path) -> dict:
    """One fresh `simpair models verdict --force`, and the verdict it stored."""
    from simpair.models.device import pick_device
    from simpair.models.precision_verdict import PrecisionVerdict
    from simpair.runtime.precision import allowed_rungs

    load_before = os.getloadavg()
    began = time.perf_counter()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([str(SIMPAIR), "models", "verdict", str(model), "--force", "--home", str(home)],
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"verdict failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    verdict = PrecisionVerdict.read(model)
    assert verdict is not None
    chosen = verdict.choose(allowed_rungs("auto", pick_device("cpu")))  # what `auto` scores in here
    return {
        "chosen": chosen.precision,
        "why": verdict.why(chosen),
        "rungs": {
            r.precision: {
                "verdict": r.verdict,
                "reason": r.reason,
                "speedup": r.speedup,
                "speedup_low": r.speedup_low,
                "timing_rounds": r.timing_rounds,
                "batch_max_diff": r.batch_max_diff,
                "runtime": r.runtime,
                "label_flip_share": r.label_flip_share,
                "metric_delta": r.metric_delta,
            }
            for r in verdict.rungs
        },  # fmt: skip
        "seconds": seconds,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "said": done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--home", type=Path, required=True, help="pipeline home holding the model's dev split"
    )
    parser.add_argument("--model", type=Path, required=True, help="model folder (its verdict is rewritten)")
    parser.add_argument("--times", type=int, default=10)
    args = parser.parse_args()
    runs: list[dict] = []
    for i in range(args.times):
        runs.append(one(args.model, args.home))
        print(json.dumps({"i": i, **{k: runs[-1][k] for k in ("chosen", "seconds", "loadavg_before")}}),
              flush=True)  # fmt: skip
        save(args, runs)  # after every measurement: a run stopped part way keeps what it measured


def save(args: argparse.Namespace, runs: list[dict]) -> None:
    """This model's entry in the results file: how many of its measurements chose each precision."""
    counts = Counter(r["chosen"] for r in runs)
    result = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        **machine_facts(),
        "command": f"nice -n 5 .venv/bin/python benchmarks/verdict_stability.py --model {args.model.name} "
        f"--times {args.times}",
        "model": str(args.model),
        "times": len(runs),
        "chosen": dict(counts),
        "same": counts.most_common(1)[0][1],
        "runs": runs,
    }
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if "models" not in saved:  # one entry per model, the latest run of each
        saved = {"models": {Path(saved["model"]).name: saved} if "model" in saved else {}}
    saved["models"][args.model.name] = result
    RESULTS.write_text(json.dumps(saved, indent=2) + "\n")


if __name__ == "__main__":
    main()
