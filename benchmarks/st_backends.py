"""sentence-transformers' fast backends (ONNX, OpenVINO, ONNX + dynamic int8), in a side virtual environment.

Why a side environment: sentence-transformers' `backend="onnx"` and `backend="openvino"` load models
through Hugging Face `optimum` and `optimum-intel`, and those do not install beside transformers 5.x,
which simpair runs on. So `benchmarks/score.py --parts default` builds a second virtual environment
once, outside the repository (`~/.cache/simpair-bench/st-venv`, or `$SIMPAIR_BENCH_ST_VENV`), with
sentence-transformers, transformers<5, optimum-intel[openvino], onnxruntime and optimum-onnx (what
`optimum[onnxruntime]` installs; see `NO_DEPS`), and runs this file there as a worker. torch is
installed first as `torch==2.13.0`, the CPU wheel the project's own install takes (the Makefile), so
pip never pulls a CUDA build. A stamp file records the requirements
and the versions pip chose; a rerun with the same requirements skips the install.

In that environment, one process times, taking turns slice by slice on the same pairs:

- `st`: `CrossEncoder.predict` / `SentenceTransformer.encode` on torch, the yardstick that the main
  environment measures too (so ratios chain through it);
- `st_onnx`: `backend="onnx"` (the model exported by optimum on load, fp32);
- `st_openvino`: `backend="openvino"` at its defaults (OpenVINO picks bf16 on CPUs with native bf16,
  f32 elsewhere; the run records which);
- `st_onnx_int8`: `export_dynamic_quantized_onnx_model` (dynamic int8, the `avx512_vnni` config where
  the CPU has VNNI, else `avx2`), loaded with `backend="onnx"`.

Each also runs once more alone in a fresh process for its peak RSS. Scores are the ones simpair gives
for the same weights: sigmoid of the cross-encoder's logit, or for a bi-encoder the cosine through
the model's stored calibration (clipped to [0, 1] when it has none). Export and load are not timed.

Only numpy, pyarrow and sentence-transformers are imported here: simpair is not installed in the side
environment.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

VENV = Path(os.environ.get("SIMPAIR_BENCH_ST_VENV", Path.home() / ".cache" / "simpair-bench" / "st-venv"))
TORCH = "torch==2.13.0"  # the CPU wheel on this machine's disk (see the Makefile's install step)
REQUIREMENTS = (
    "sentence-transformers<6",
    "transformers<5",
    "optimum-intel[openvino]",
    "onnxruntime",
    "onnx",
    "pyarrow",
    "psutil",
)
# What `optimum[onnxruntime]` brings, installed without its pins: optimum-onnx 0.1 pins optimum~=2.1 while
# optimum-intel 2.2 pins optimum~=2.3, so pip finds no set with both and backtracks for ever.
NO_DEPS = ("optimum-onnx",)
STAMP = "simpair-bench-stamp.json"
Method = Callable[[list[str], list[str]], np.ndarray]  # scores of pairs (text_a[i], text_b[i])
BACKENDS = ("st", "st_onnx", "st_openvino", "st_onnx_int8")
PACKAGES = ("sentence-transformers", "transformers", "torch", "optimum", "optimum-intel", "optimum-onnx",
            "onnxruntime", "openvino")  # fmt: skip


# ------------------------------------------------------------------------------ the side environment
def ensure_venv(venv: Path = VENV) -> dict:
    """The side environment, created and installed once; returns its stamp (requirements, versions)."""
    stamp_file = venv / STAMP
    wanted = [TORCH, *REQUIREMENTS, *NO_DEPS]
    if stamp_file.is_file():
        stamp = json.loads(stamp_file.read_text())
        if stamp.get("requirements") == wanted:
            return stamp
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--no-compile"]
    subprocess.run([*pip, TORCH], check=True)  # first: the CPU wheel, reused by the next resolve
    # torch pinned again: optimum-intel needs torchvision, whose newest release wants a newer torch,
    # and pip would otherwise replace the CPU wheel by a CUDA build (6 GB)
    subprocess.run([*pip, TORCH, *REQUIREMENTS], check=True)
    subprocess.run([*pip, "--no-deps", *NO_DEPS], check=True)
    # that torchvision is built for CUDA torch and breaks `import transformers` beside the CPU wheel;
    # text models never need it
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "torchvision"], check=True)
    check = "import torch; assert torch.__version__.endswith('+cpu'), torch.__version__"
    subprocess.run([str(python), "-c", check], check=True)
    frozen = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True)
    versions = {}
    for line in frozen.stdout.splitlines():
        name, _, version = line.partition("==")
        if name.lower() in PACKAGES:
            versions[name.lower()] = version
    stamp = {"requirements": wanted, "versions": versions}
    stamp_file.write_text(json.dumps(stamp, indent=2) + "\n")
    return stamp


def side_copy(model_dir: Path, work: Path) -> Path:
    """A scratch copy of the model's files (not links): the int8 export writes `onnx/` into it."""
    copy = work / f"st-{model_dir.name}"
    shutil.rmtree(copy, ignore_errors=True)
    skip = shutil.ignore_patterns("onnx", "openvino", "precision_verdict*", "train_pairs.txt")
    shutil.copytree(model_dir.resolve(), copy, ignore=skip)
    return copy


def run(kind: str, model_dir: Path, pairs: Path, threads: int, slices: int, work: Path,
        max_length: int, batch: int, venv: Path = VENV, alone: bool = True) -> dict:  # fmt: skip
    """Every backend on `pairs` in the side environment: the interleaved run, then one fresh run each
    (`alone=False` leaves the fresh runs to the caller, who alternates them with ours: `run_alone`)."""
    stamp = ensure_venv(venv)
    copy = side_copy(model_dir, work)

    def worker(*args: str) -> dict:
        return _side_worker(venv, copy, pairs, kind, threads, max_length, batch, *args)

    worker("export")
    out = worker("interleaved", "--slices", str(slices))
    if alone:
        out["peak_rss_mb"] = {name: worker("alone", "--backend", name)["peak_rss_mb"] for name in BACKENDS}
    out["versions"] = stamp["versions"]
    return out


def run_alone(kind: str, model_dir: Path, pairs: Path, threads: int, work: Path, max_length: int,
              batch: int, name: str, venv: Path = VENV) -> dict:  # fmt: skip
    """One backend alone in a fresh side process, on the scratch copy that `run` prepared (int8 file in it).

    Returns wall and CPU seconds and peak RSS, so the caller can alternate it with ours, fresh process
    against fresh process, and take the ratio in pairs per CPU second (what a loaded machine leaves fair).
    """
    copy = work / f"st-{model_dir.name}"
    return _side_worker(venv, copy, pairs, kind, threads, max_length, batch, "alone", "--backend", name)


def _side_worker(venv: Path, copy: Path, pairs: Path, kind: str, threads: int, max_length: int, batch: int,
                 *args: str) -> dict:  # fmt: skip
    """One worker of this script in the side venv (`--worker ARGS`), on `threads` threads; its last
    stdout line is its JSON result."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")  # fmt: skip
    env.pop("PYTHONPATH", None)
    command = [str(venv / "bin" / "python"), __file__, "--worker", *args, "--kind", kind,
               "--model", str(copy), "--pairs", str(pairs), "--threads", str(threads),
               "--max-length", str(max_length), "--batch", str(batch)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"side worker {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ inside the side venv
def _quantization_config() -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "avx512_vnni" if "avx512_vnni" in flags else "avx2"


def _int8_file(model: Path) -> str:
    """The quantized graph's name: `model_qint8_avx512_vnni.onnx`, or `model_quint8_avx2.onnx` on AVX2."""
    [path] = sorted((model / "onnx").glob(f"model_*int8_{_quantization_config()}.onnx"))
    return path.relative_to(model).as_posix()


def _read_meta(model: Path) -> dict:
    path = model / "simpair.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def load(kind: str, model: Path, name: str, max_length: int) -> object:
    """One sentence-transformers model object for a backend name of `BACKENDS`."""
    from sentence_transformers import CrossEncoder, SentenceTransformer

    backend = {"st": "torch", "st_onnx": "onnx", "st_openvino": "openvino", "st_onnx_int8": "onnx"}[name]
    kwargs: dict = {"device": "cpu", "local_files_only": True, "backend": backend}
    if name == "st_onnx_int8":
        kwargs["model_kwargs"] = {"file_name": _int8_file(model)}
    elif backend == "onnx":
        kwargs["model_kwargs"] = {"export": True}  # fp32, exported on load (not the int8 file beside it)
    if kind == "cross":
        return CrossEncoder(str(model), max_length=max_length, **kwargs)
    bi = SentenceTransformer(str(model), **kwargs)
    bi.max_seq_length = max_length
    return bi


def scorer(kind: str, st: object, model: Path, batch: int) -> Method:
    """Scores as simpair gives them for these weights (sigmoid of the logit; calibrated cosine)."""
    if kind == "cross":
        import torch

        def cross(a: list[str], b: list[str]) -> np.ndarray:
            return st.predict(list(zip(a, b, strict=True)), batch_size=batch,  # type: ignore[attr-defined]
                              activation_fn=torch.nn.Sigmoid(), show_progress_bar=False)  # fmt: skip

        return cross
    calibration = _read_meta(model).get("calibration")

    def bi(a: list[str], b: list[str]) -> np.ndarray:
        enc = st.encode  # type: ignore[attr-defined]
        ea = enc(a, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
        eb = enc(b, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
        cos = np.einsum("ij,ij->i", ea, eb).astype(np.float64)
        if calibration:
            return 1.0 / (1.0 + np.exp(-(calibration["a"] * cos + calibration["b"])))
        return np.clip(cos, 0.0, 1.0)

    return bi


def stack_scorer(cross_st: object, bi_st: object, spec: dict, batch: int) -> Method:
    """The champion stack's score by hand, as a user with both models and the stack's `stack.json`
    would write it: the cross-encoder's logit and the bi-encoder's cosine, standardised, through the
    logistic combiner. The same two forward passes over every pair as `simpair score` on the stack."""
    import torch

    if spec.get("combiner") != "logistic" or spec.get("features") != ["member:0", "member:1"]:
        raise ValueError("the work-matched script covers a logistic stack of [cross, bi] members only")
    # (the caller, `score_e2e.prepare_stack`, checked the members' kinds, order and one-way scoring)
    mean, scale, coef = (np.asarray(spec[k], dtype=np.float64) for k in ("mean", "scale", "coef"))

    def stack(a: list[str], b: list[str]) -> np.ndarray:
        logit = cross_st.predict(list(zip(a, b, strict=True)), batch_size=batch,  # type: ignore[attr-defined]
                                 activation_fn=torch.nn.Identity(), show_progress_bar=False)  # fmt: skip
        enc = bi_st.encode  # type: ignore[attr-defined]
        ea = enc(a, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
        eb = enc(b, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
        x = np.column_stack([np.asarray(logit, np.float64), np.einsum("ij,ij->i", ea, eb)])
        return 1.0 / (1.0 + np.exp(-(((x - mean) / scale) @ coef + float(spec["intercept"]))))

    return stack


def _pairs(path: Path) -> tuple[list[str], list[str]]:
    table = pq.read_table(path, columns=["text_a", "text_b"])
    return table.column("text_a").to_pylist(), table.column("text_b").to_pylist()


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_export(kind: str, model: Path, max_length: int) -> dict:
    """The dynamic int8 quantization of the exported fp32 graph, written to `onnx/` of the scratch copy."""
    from sentence_transformers import export_dynamic_quantized_onnx_model

    st = load(kind, model, "st_onnx", max_length)
    config = _quantization_config()
    export_dynamic_quantized_onnx_model(st, quantization_config=config, model_name_or_path=str(model))
    return {"quantization_config": config, "int8_file": _int8_file(model)}


def worker_export_openvino(kind: str, model: Path, max_length: int) -> dict:
    """The OpenVINO IR saved into `openvino/` of the scratch copy, as a user does once (`save_pretrained`
    after the first `backend="openvino"` load), so a later load reads it instead of exporting again."""
    st = load(kind, model, "st_openvino", max_length)
    st.save_pretrained(str(model))  # type: ignore[attr-defined]
    return {"openvino_files": sorted(p.name for p in (model / "openvino").iterdir())}


def worker_script(
    kind: str, model: Path, pairs: Path, max_length: int, batch: int, name: str, out: Path
) -> dict:
    """A user's whole scoring script for one backend: read the Parquet pairs, load the pre-exported model,
    score, write `pair_id, score` to Parquet. The caller times the process from start to exit (imports,
    load and all); the phases measured inside are returned for the profile."""
    import pyarrow as pa

    began = time.perf_counter()
    table = pq.read_table(pairs, columns=["pair_id", "text_a", "text_b"])
    text_a, text_b = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    read = time.perf_counter()
    if kind == "stack":  # `model` is the stack's folder of side copies: cross/, bi/, stack.json
        spec = json.loads((model / "stack.json").read_text())
        members = [load(k, model / k, name, max_length) for k in ("cross", "bi")]
        method = stack_scorer(*members, spec, batch)
    else:
        method = scorer(kind, load(kind, model, name, max_length), model, batch)
    loaded = time.perf_counter()
    scores = np.asarray(method(text_a, text_b), dtype=np.float64)
    scored = time.perf_counter()
    pq.write_table(pa.table({"pair_id": table.column("pair_id"), "score": scores}), out)
    wrote = time.perf_counter()
    return {"read_s": read - began, "load_s": loaded - read, "score_s": scored - loaded,
            "write_s": wrote - scored, "rows": len(text_a), "peak_rss_mb": _peak_mb()}  # fmt: skip


def take_turns(methods: dict[str, Method], text_a: list[str], text_b: list[str], slices: int) -> dict:
    """Every method on the same pairs, taking turns slice by slice (who goes first rotates each slice).

    On a shared machine the load changes minute to minute; taking turns on small slices exposes all
    of them to the same load, so their ratios hold even when absolute numbers do not. One warm-up call
    each first (graph compilation, allocation). Max abs differences are against `st` (theirs on torch).
    """
    for method in methods.values():
        method(text_a[:8], text_b[:8])
    seconds = dict.fromkeys(methods, 0.0)
    cpu = dict.fromkeys(methods, 0.0)  # CPU seconds of the whole process (every thread) during the call
    scores: dict[str, list[np.ndarray]] = {name: [] for name in methods}
    bounds = np.linspace(0, len(text_a), slices + 1).astype(int)
    for turn, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        names = list(methods)
        first = turn % len(names)
        for name in names[first:] + names[:first]:
            began, began_cpu = time.perf_counter(), time.process_time()
            scores[name].append(np.asarray(methods[name](text_a[lo:hi], text_b[lo:hi]), dtype=np.float64))
            seconds[name] += time.perf_counter() - began
            cpu[name] += time.process_time() - began_cpu
    joined = {name: np.concatenate(parts) for name, parts in scores.items()}
    return {
        "pairs": len(text_a),
        "pairs_per_s": {name: len(text_a) / sec for name, sec in seconds.items()},
        "cpu_seconds": cpu,
        "pairs_per_cpu_s": {name: len(text_a) / sec for name, sec in cpu.items()},
        "max_abs_diff_vs_st": {name: float(np.abs(joined[name] - joined["st"]).max()) for name in methods},
        "loadavg": os.getloadavg(),
    }


def worker_interleaved(kind: str, model: Path, pairs: Path, max_length: int, batch: int, slices: int) -> dict:
    """Every backend of `BACKENDS` in one process, taking turns slice by slice."""
    import openvino

    text_a, text_b = _pairs(pairs)
    methods = {name: scorer(kind, load(kind, model, name, max_length), model, batch) for name in BACKENDS}
    return {
        **take_turns(methods, text_a, text_b, slices),
        "openvino_inference_precision": _type_name(
            openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
        ),
        "quantization_config": _quantization_config(),
    }


def _type_name(hint: object) -> str:
    """'f32' or 'bf16' (OpenVINO's element type name), whatever object the property comes back as."""
    name = getattr(hint, "get_type_name", None)
    return str(name()) if callable(name) else str(hint)


def worker_alone(kind: str, model: Path, pairs: Path, max_length: int, batch: int, name: str) -> dict:
    """One backend alone in a fresh process: its pairs/s (wall and CPU) and the process's peak RSS.

    One warm-up call on 8 pairs first (graph compilation), as in `take_turns`; load is not timed.
    """
    text_a, text_b = _pairs(pairs)
    method = scorer(kind, load(kind, model, name, max_length), model, batch)
    method(text_a[:8], text_b[:8])
    began, began_cpu = time.perf_counter(), time.process_time()
    method(text_a, text_b)
    seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    return {"pairs_per_s": len(text_a) / seconds, "seconds": seconds, "cpu_seconds": cpu,
            "pairs_per_cpu_s": len(text_a) / cpu, "rows": len(text_a), "peak_rss_mb": _peak_mb(),
            "loadavg": os.getloadavg()}  # fmt: skip


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setup", action="store_true", help="only create / check the side environment")
    parser.add_argument("--worker", choices=("export", "export-openvino", "interleaved", "alone", "script"))
    parser.add_argument("--out", type=Path, help="script: where the scores go (Parquet)")
    parser.add_argument("--kind", choices=("cross", "bi", "stack"))
    parser.add_argument("--model", type=Path)
    parser.add_argument("--pairs", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--slices", type=int, default=20)
    parser.add_argument("--backend", choices=BACKENDS)
    args = parser.parse_args()
    if args.setup:
        print(json.dumps(ensure_venv()))
        return
    if args.worker == "script":  # a user's script: no thread settings, the libraries' defaults
        out = worker_script(
            args.kind, args.model, args.pairs, args.max_length, args.batch, args.backend, args.out
        )
        print(json.dumps(out))
        return
    import torch

    torch.set_num_threads(args.threads)
    if args.worker == "export":
        out = worker_export(args.kind, args.model, args.max_length)
    elif args.worker == "export-openvino":
        out = worker_export_openvino(args.kind, args.model, args.max_length)
    elif args.worker == "interleaved":
        out = worker_interleaved(args.kind, args.model, args.pairs, args.max_length, args.batch, args.slices)
    else:
        out = worker_alone(args.kind, args.model, args.pairs, args.max_length, args.batch, args.backend)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
