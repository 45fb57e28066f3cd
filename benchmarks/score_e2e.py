"""End to end, fresh processes: `simpair score --no-prefect` at its defaults against a user's scoring script
with sentence-transformers' OpenVINO backend and its dynamic-int8 ONNX backend.

Run by hand, niced (the machine is shared):

    nice -n 10 .venv/bin/python benchmarks/score_e2e.py --home HOME --cross DIR --stack DIR --bi DIR \\
        --sizes 500 4000 --rounds 2
    nice -n 10 .venv/bin/python benchmarks/score_e2e.py ... --sizes 100000 --rounds 1 --no-cold

What one measurement is: a whole process, timed by this script from its start to its exit, with the
peak RSS of its process tree (sampled every 0.1 s, every descendant summed) beside the time.

- ours: `simpair score --no-prefect --inbox IN --out OUT --model DIR --home HOME` at every default
  (`--precision auto`: the model's stored verdict, measured beforehand by `simpair models verdict`
  as a registration does; `--backend auto`, batch 64, threads = CPUs). Read, validate, score, write
  the date-partitioned output and the ledger. `--home` also holds the graph cache.
- theirs: `benchmarks/st_backends.py --worker script` in the side environment (sentence-transformers
  with optimum; see that file): read the same Parquet file, load the model, `CrossEncoder.predict`
  or `SentenceTransformer.encode` + cosine at the library's default batch size (32) and threads,
  write `pair_id, score` to Parquet. `st_openvino` loads the OpenVINO IR saved beforehand
  (`save_pretrained`), `st_onnx_int8` the dynamic-int8 graph exported beforehand
  (`export_dynamic_quantized_onnx_model`, the VNNI config where the CPU has it); neither export is timed.

Rounds alternate the contenders (the first one rotates each round), so a change of load on the
shared machine falls on all of them; ratios are taken within a round and the range over rounds is
reported. One cold round first (graph cache and page cache empty for ours, first load for theirs) is
recorded apart and not used for the ratios unless `--no-cold` (then every round counts: meant for a
size run after the smaller ones have warmed the cache).

Texts: `--texts msrp` (default) draws random pairs of MSRP sentences, which repeat once a file
outgrows the ~11k sentences (5.5% distinct at 100,000 pairs), where our bi-encoders encode each
distinct sentence once; `--texts unique` makes every text distinct (`pretokenize.write_pairs`: STS-B
words, 5-24 a sentence), as in logs that never repeat a sentence.

Groups: `cross` times the paraphrase cross-encoder and the paraphrase champion (the stack) against
their cross-encoder scripts on `--cross` (by default the stack's own cross member); `bi` the STS
bi-encoder against their bi-encoder scripts. `--theirs ... st_onnx_int8_stack` adds the work-matched
script for the stack: their int8 ONNX cross-encoder and int8 ONNX bi-encoder (the stack's zero-shot
member) in one process, the logit and cosine combined with the stack's own coefficients, so both
sides run the same two models over every pair.

`--parts invariance` adds the batch-invariance figure: per precision the loader can run here (fp32;
int8; bf16 only where it is native, since `auto` never picks it otherwise), the largest change of a
pair's score between batch sizes 64, 8, 1 and a shuffled order.

Writes benchmarks/results/score_e2e.json (a run's sizes merged into what is there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import st_backends  # benchmarks/st_backends.py: the side environment and its workers
from common import MAX_LENGTH, RESULTS_DIR, ROOT, SHARED, machine_facts, sentence_pool, write_pairs
from pretokenize import write_pairs as write_unique_pairs

RESULTS = RESULTS_DIR / "score_e2e.json"
SIMPAIR = ROOT / ".venv" / "bin" / "simpair"
THEIRS = ("st_openvino", "st_onnx_int8")
# work-matched: their int8 scripts for both of the stack's members in one process, combined by hand
STACKED = "st_onnx_int8_stack"
THEIR_BATCH = 32  # CrossEncoder.predict's and SentenceTransformer.encode's default


# ------------------------------------------------------------------------------------------ timing
def timed(command: list[str], env: dict[str, str]) -> dict:
    """Run a command to its exit: wall seconds, CPU seconds of the tree, peak RSS of the tree (MB)."""
    import psutil

    began = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    top = psutil.Process(proc.pid)
    peak = 0.0
    while proc.poll() is None:
        try:
            tree = [top, *top.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()) / 2**20)
        except psutil.Error:
            pass
        time.sleep(0.1)
    seconds = time.perf_counter() - began
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed ({proc.returncode}):\n{err[-3000:]}")
    return {"seconds": seconds, "peak_tree_rss_mb": peak, "stdout": out, "stderr_tail": err[-600:],
            "loadavg": os.getloadavg()}  # fmt: skip


def ours(model: Path, pairs: Path, home: Path, work: Path, tag: str) -> dict:
    """`simpair score --no-prefect` at its defaults, one fresh process on one Parquet file."""
    inbox, out = work / f"in-{tag}", work / f"out-{tag}"
    shutil.rmtree(out, ignore_errors=True)
    inbox.mkdir(exist_ok=True)
    link = inbox / pairs.name
    if not link.exists():
        link.symlink_to(pairs)
    summary = work / f"summary-{tag}.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    command = [str(SIMPAIR), "score", "--no-prefect", "--inbox", str(inbox), "--out", str(out),
               "--model", str(model), "--home", str(home), "--json", str(summary)]  # fmt: skip
    run = timed(command, env)
    facts = json.loads(summary.read_text())
    [output] = list(out.glob("date=*/*.parquet"))
    scores = pq.read_table(output, columns=["pair_id", "score"]).sort_by("pair_id")
    np.save(work / f"scores-{tag}.npy", scores.column("score").to_numpy())
    shutil.rmtree(out, ignore_errors=True)
    del run["stdout"]
    return {**run, "rows": facts["rows_scored"], "precision": facts.get("precision"),
            "reported_pairs_per_s": facts.get("pairs_per_s")}  # fmt: skip


def theirs(kind: str, copy: Path, pairs: Path, name: str, work: Path, tag: str) -> dict:
    """A user's script with one sentence-transformers backend, one fresh process in the side venv
    (`STACKED`: both of the stack's members, in the folder `prepare_stack` made)."""
    if name == STACKED:
        kind, copy, name = "stack", work / "st-stack", "st_onnx_int8"
    out = work / f"theirs-{tag}.parquet"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    command = [str(st_backends.VENV / "bin" / "python"), st_backends.__file__, "--worker", "script",
               "--kind", kind, "--model", str(copy), "--pairs", str(pairs), "--backend", name,
               "--max-length", str(MAX_LENGTH), "--batch", str(THEIR_BATCH), "--out", str(out)]  # fmt: skip
    run = timed(command, env)
    phases = json.loads(run.pop("stdout").strip().splitlines()[-1])
    scores = pq.read_table(out).sort_by("pair_id").column("score").to_numpy()
    np.save(work / f"scores-{tag}.npy", scores)
    out.unlink()
    return {**run, "phases": phases, "rows": phases["rows"]}


# ------------------------------------------------------------------------------------------ setup
def write_texts(texts: str, pool: list[str], n: int, path: Path) -> float:
    """The pair file for `--texts`; returns its distinct-sentence share."""
    if texts == "unique":  # every text distinct, as in logs that never repeat a sentence
        write_unique_pairs(path, n)
        return 1.0
    return write_pairs(pool, n, path)


def prepare_theirs(kind: str, model: Path, work: Path) -> Path:
    """A scratch copy of the model with both of their exports in it (not timed)."""
    st_backends.ensure_venv()
    copy = st_backends.side_copy(model, work)
    for worker in ("export", "export-openvino"):
        st_backends._side_worker(st_backends.VENV, copy, copy, kind, 2, MAX_LENGTH, THEIR_BATCH, worker)
    return copy


def prepare_stack(stack: Path, cross: Path, cross_copy: Path, work: Path) -> None:
    """`work/st-stack`: their exported copies of both members and the stack's combiner (not timed).

    Only a logistic stack of [its cross-encoder, a bi-encoder], the cross-encoder scored one way round,
    has a by-hand script here; `cross_copy` is reused when `cross` is the stack's own member."""
    spec = json.loads((stack / "stack.json").read_text())
    kinds = [json.loads((stack / m / "simpair.json").read_text()) for m in spec["members"]]
    shape = [(k["kind"], k.get("symmetric", False)) for k in kinds]
    if (
        spec["combiner"] != "logistic"
        or spec["features"] != ["member:0", "member:1"]
        or shape != [("cross", False), ("bi", False)]
    ):
        raise ValueError(f"{stack}: the work-matched script covers a logistic [cross, bi] stack only")
    own = (stack / spec["members"][0]).resolve()
    cross_copy = cross_copy if cross.resolve() == own else prepare_theirs("cross", own, work)
    bi = prepare_theirs("bi", stack / spec["members"][1], work)
    folder = work / "st-stack"
    folder.mkdir(exist_ok=True)
    for name, target in (("cross", cross_copy), ("bi", bi)):
        if not (folder / name).exists():
            (folder / name).symlink_to(target)
    shutil.copyfile(stack / "stack.json", folder / "stack.json")


def ensure_verdict(model: Path, home: Path) -> str:
    """The model's stored precision verdict, measured once if it has none (as a registration does)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([str(SIMPAIR), "models", "verdict", str(model), "--home", str(home)],
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    said = (done.stdout.strip() or done.stderr.strip()).splitlines()
    # a model with no dev split has no verdict: `auto` then scores it at fp32, and the row says so
    return ("" if done.returncode == 0 else f"no verdict (exit {done.returncode}): ") + (
        said[-1] if said else ""
    )


def first_member(stack: Path, kind: str) -> Path:
    """The stack's trained member of this kind (their script scores with what a user would: that model)."""
    for meta in sorted((stack / "members").glob("*/simpair.json")):
        data = json.loads(meta.read_text())
        if data.get("kind") == kind and "zero-shot" not in meta.parent.name:
            return meta.parent
    raise FileNotFoundError(f"{stack}: no trained {kind} member")


# ------------------------------------------------------------------------------------------ rounds
def run_group(group: str, models: dict[str, Path], copy: Path, kind: str, pairs: Path, home: Path,
              rounds: int, cold: bool, work: Path, theirs_run: tuple[str, ...] = THEIRS) -> dict:  # fmt: skip
    """Every contender of a group on one pair file, in alternating rounds (`theirs_run`: which of
    their scripts run; a large size may leave out the slower one for time)."""
    names = [*models, *theirs_run]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    cold_runs: dict[str, dict] = {}
    for round_ in range(-1 if cold else 0, rounds):
        first = max(round_, 0) % len(names)
        for name in names[first:] + names[:first]:
            tag = f"{group}-{name}-{pairs.stem}"
            if name in models:
                result = ours(models[name], pairs, home, work, tag)
            else:
                result = theirs(kind, copy, pairs, name, work, tag)
            result["pairs_per_s"] = result["rows"] / result["seconds"]
            print(json.dumps({"group": group, "round": round_, "name": name, "pairs": result["rows"],
                              "seconds": round(result["seconds"], 2),
                              "rss": round(result["peak_tree_rss_mb"])}), flush=True)  # fmt: skip
            (cold_runs.__setitem__(name, result) if round_ < 0 else runs[name].append(result))
    # their single-model scripts against each of ours; the work-matched one against the stack alone
    matched = [
        (mine, other) for mine in models for other in theirs_run if other != STACKED or mine == "ours_stack"
    ]
    # scores compared where both sides compute the same thing (not the stack against one model's script)
    same = [(m, o) for m, o in matched if (m == "ours_stack") == (o == STACKED)]
    ratios = {
        f"{mine}_vs_{other}": [a["pairs_per_s"] / b["pairs_per_s"] for a, b in zip(runs[mine], runs[other],
                                                                                   strict=True)]
        for mine, other in matched
    }  # fmt: skip
    agreement = {}
    for mine, other in same:
        a = np.load(work / f"scores-{group}-{mine}-{pairs.stem}.npy")
        b = np.load(work / f"scores-{group}-{other}-{pairs.stem}.npy")
        agreement[f"{mine}_vs_{other}"] = float(np.abs(a - b).max())
    return {"runs": runs, "cold": cold_runs, "ratios": ratios, "max_abs_score_diff": agreement}


# ------------------------------------------------------------------------------------- invariance
def invariance(model: Path, n: int, seed: int = 1) -> dict:
    """Per precision the loader can run here: the largest change of a pair's score between batch sizes
    64, 8, 1 and a shuffled order (batch 8), on n random pairs of MSRP sentences."""
    import torch

    from simpair.models.device import native_bf16
    from simpair.runtime.loader import load_predictor

    rng = np.random.default_rng(seed)
    pool = sentence_pool(SHARED)
    a = [pool[i] for i in rng.integers(0, len(pool), n)]
    b = [pool[i] for i in rng.integers(0, len(pool), n)]
    order = rng.permutation(n)
    precisions = ["fp32", "int8"] + (["bf16"] if native_bf16(torch.device("cpu")) else [])
    out: dict = {"pairs": n, "bf16_native": "bf16" in precisions}
    for precision in precisions:
        predictor = load_predictor(str(model), precision=precision, backend="auto", recheck=False)
        want = np.asarray(predictor.predict(a, b, batch_size=64)["score"], dtype=np.float64)
        moved = {size: np.asarray(predictor.predict(a, b, batch_size=size)["score"]) for size in (8, 1)}
        shuffled = np.asarray(
            predictor.predict([a[i] for i in order], [b[i] for i in order], batch_size=8)["score"]
        )
        back = np.empty_like(shuffled)
        back[order] = shuffled
        moved["shuffled"] = back
        out[precision] = {
            "variant": getattr(predictor, "variant", type(predictor).__name__),
            **{f"max_diff_b64_vs_{k}": float(np.abs(v - want).max()) for k, v in moved.items()},
        }
        out[precision]["max_diff"] = max(v for k, v in out[precision].items() if k.startswith("max_diff_b"))
    return out


# ------------------------------------------------------------------------------------------ report
def markdown(result: dict) -> str:
    """The end-to-end table: one row per group, size and contender, ratios as the range over rounds."""
    lines = ["| model | pairs | contender | rounds | wall s (median) | pairs/s (median) | peak RSS MB (tree) "
             "| ours / their OpenVINO | ours / their int8 ONNX | ours / their int8 ONNX, both members |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in result["rows"]:
        for name, runs in row["runs"].items():
            if not runs:
                continue
            secs = float(np.median([r["seconds"] for r in runs]))
            rate = float(np.median([r["pairs_per_s"] for r in runs]))
            rss = max(r["peak_tree_rss_mb"] for r in runs)
            cells = []
            for other in (*THEIRS, STACKED):
                got = row["ratios"].get(f"{name}_vs_{other}")
                cells.append(f"{min(got):.2f}-{max(got):.2f}x" if got and len(got) > 1
                             else f"{got[0]:.2f}x" if got else "")  # fmt: skip
            label = row["labels"].get(name, name)
            texts = "" if row.get("texts", "msrp") == "msrp" else f" {row['texts']} texts"
            head = f"| {row['group']}{texts} | {row['pairs']:,} | {label} | {len(runs)} | {secs:.1f} "
            head += f"| {rate:.0f} "
            lines.append(f"{head}| {rss:.0f} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", type=Path, required=True, help="pipeline home of the models (dev splits)")
    parser.add_argument("--cross", type=Path, help="the paraphrase cross-encoder")
    parser.add_argument("--stack", type=Path, help="the paraphrase champion (stack); its cross member "
                        "is the cross-encoder when --cross is not given")  # fmt: skip
    parser.add_argument("--bi", type=Path, help="the STS bi-encoder")
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 4000])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-cold", action="store_true", help="no cold round first (every round counts)")
    parser.add_argument("--groups", nargs="+", choices=("cross", "bi"), default=["cross", "bi"])
    parser.add_argument("--parts", nargs="+", choices=("e2e", "invariance"), default=["e2e"])
    parser.add_argument("--texts", choices=("msrp", "unique"), default="msrp",
                        help="msrp: random pairs of MSRP sentences (repeating past ~11k sentences); "
                        "unique: every text distinct (STS-B words, 5-24 each)")  # fmt: skip
    parser.add_argument("--theirs", nargs="+", choices=(*THEIRS, STACKED), default=list(THEIRS),
                        help=f"which of their scripts run (default both single-model ones; {STACKED}: "
                        "their int8 scripts of both stack members in one process, work-matched to the "
                        "stack, with --stack)")  # fmt: skip
    parser.add_argument("--invariance-pairs", type=int, default=600)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cross = args.cross or (first_member(args.stack, "cross") if args.stack else None)
    pool = sentence_pool(SHARED)
    result: dict = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        **machine_facts(),
        "command": "nice -n 10 .venv/bin/python benchmarks/score_e2e.py " + " ".join(sys.argv[1:]),
        "loadavg_start": os.getloadavg(),
        "rows": [],
    }
    work = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    try:
        if "invariance" in args.parts:
            result["invariance"] = {
                label: invariance(path, args.invariance_pairs)
                for label, path in (("cross", cross), ("bi", args.bi)) if path is not None
            }  # fmt: skip
            print(json.dumps(result["invariance"]), flush=True)
            save(result, args)
        if "e2e" in args.parts:
            result["versions_side"] = st_backends.ensure_venv().get("versions")
            plan = []
            if "cross" in args.groups and cross is not None:
                models = {"ours_cross": cross, **({"ours_stack": args.stack} if args.stack else {})}
                plan.append(("cross", "cross", models, cross))
            if "bi" in args.groups and args.bi is not None:
                plan.append(("bi", "bi", {"ours_bi": args.bi}, args.bi))
            verdicts = {str(p): ensure_verdict(p, args.home) for _, _, m, _ in plan for p in m.values()}
            result["verdicts"] = verdicts
            for group, kind, models, theirs_model in plan:
                copy = prepare_theirs(kind, theirs_model, work)
                if group == "cross" and args.stack and STACKED in args.theirs:
                    prepare_stack(args.stack, cross, copy, work)
                for n in args.sizes:
                    pairs = work / f"pairs-{args.texts}-{n}.parquet"
                    distinct = None if pairs.exists() else write_texts(args.texts, pool, n, pairs)
                    row = run_group(group, models, copy, kind, pairs, args.home, args.rounds,
                                    not args.no_cold, work, theirs_for(group, args))  # fmt: skip
                    row.update(group=group, pairs=n, texts=args.texts, distinct_share=distinct,
                               models={k: str(v) for k, v in models.items()}, theirs_model=str(theirs_model),
                               labels={"ours_cross": "simpair score, cross-encoder",
                                       "ours_stack": "simpair score, champion stack",
                                       "ours_bi": "simpair score, bi-encoder",
                                       "st_openvino": "their script, OpenVINO",
                                       "st_onnx_int8": "their script, ONNX dynamic int8",
                                       STACKED: "their script, int8 ONNX, both stack members"})  # fmt: skip
                    result["rows"].append(row)
                    print(markdown({"rows": [row]}), flush=True)
                    save(result, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["loadavg_end"] = os.getloadavg()
    print(markdown(result))
    save(result, args)


def theirs_for(group: str, args: argparse.Namespace) -> tuple[str, ...]:
    """Their scripts for a group: the work-matched stack script only where a stack is scored."""
    return tuple(n for n in args.theirs if n != STACKED or (group == "cross" and args.stack))


def save(result: dict, args: argparse.Namespace) -> None:
    """Merge this run into the results file: its (group, size) rows replace the saved ones, the rest stay.

    Called after every row too, so a run stopped part way keeps what it measured."""
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}

    def key(row: dict) -> tuple:
        return row["group"], row["pairs"], row.get("texts", "msrp")

    mine = {key(r) for r in result["rows"]}
    kept = [r for r in saved.get("rows", []) if key(r) not in mine]
    runs = [r for r in saved.get("runs", []) if r.get("when") != result["when"]]
    runs.append(
        {k: v for k, v in result.items() if k != "rows"} | {"sizes": args.sizes, "groups": args.groups}
    )
    merged = {**saved, "rows": kept + result["rows"], "runs": runs}
    if "invariance" in result:
        merged["invariance"] = result["invariance"] | {"when": result["when"]}
    RESULTS.write_text(json.dumps(merged, indent=2) + "\n")


if __name__ == "__main__":
    main()
