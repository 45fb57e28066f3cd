"""Compiled graphs kept across processes (`simpair.runtime.graph_cache`), and the fp32 recheck built late.

Real tiny models, real ONNX export, ONNX Runtime and OpenVINO; the cache lives in the test's folder
(`$SIMPAIR_GRAPH_CACHE`). What is counted is what a fresh process does: which cache files it writes
(their modification times) and how many times it calls the exporter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_scoring_support import make_pairs, write_batch
from typer.testing import CliRunner

from simpair.cli import app
from simpair.models import save_tiny_model
from simpair.runtime import graph_cache, openvino_backend, recheck
from simpair.runtime.int8_backend import build_int8_encoder, graph_name
from simpair.runtime.loader import load_predictor
from simpair.runtime.onnx_backend import OrtPredictor, build_encoder
from simpair.runtime.weights_digest import MEMO_FOLDER, weights_digest

INT8 = graph_name("per-row")  # this CPU's per-row recipe (7-bit weights without VNNI)

# scores a model in a fresh process and says how often the exporter ran (the real one, counted)
_SCRIPT = """
import json, sys
import torch
from simpair.runtime import onnx_backend
from simpair.runtime.loader import load_predictor

torch.set_num_threads(1)
calls = []
export = onnx_backend.export_encoder
onnx_backend.export_encoder = lambda *args, **kw: calls.append(1) or export(*args, **kw)
model, precision, backend = sys.argv[1:4]
a, b = json.loads(sys.argv[4]), json.loads(sys.argv[5])
predictor = load_predictor(model, precision=precision, backend=backend, threads=1, recheck=False)
print(json.dumps({"exports": len(calls), "variant": predictor.variant,
                  "score": predictor.predict(a, b)["score"].tolist()}))
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("models") / "cross", task="paraphrase", kind="cross")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(graph_cache.ENV, str(tmp_path / "graph-cache"))
    return tmp_path / "graph-cache"


def _entry(cache: Path) -> Path:
    """The cache's one model entry (the file-digest memo beside it is not an entry)."""
    [entry] = [p for p in cache.iterdir() if p.name != MEMO_FOLDER]
    return entry


def _texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    table = make_pairs(n, seed=seed)
    return table.column("text_a").to_pylist(), table.column("text_b").to_pylist()


def _fresh_process(model: Path, precision: str, backend: str, cache: str, a: list, b: list) -> dict:
    env = {**os.environ, graph_cache.ENV: cache, "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-c", _SCRIPT, str(model), precision, backend, json.dumps(a), json.dumps(b)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def test_a_second_process_loads_the_cached_graphs_and_scores_the_same(
    model: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _texts(40, seed=5)
    first = _fresh_process(model, "int8", "onnx", str(cache), a, b)
    assert first["exports"] >= 1 and first["variant"] == "cls-last-layer+int8-per-row"
    written = _files(cache)
    names = {Path(name).name for name in written}
    assert {"fp32.onnx", f"{INT8}.onnx", f"ort-{INT8}.onnx"} <= names
    assert all(f"{name}.{graph_cache.MANIFEST}" in names for name in names if name.endswith(".onnx"))

    second = _fresh_process(model, "int8", "onnx", str(cache), a, b)
    assert second["exports"] == 0  # nothing exported, quantized or optimized again
    assert _files(cache) == written  # not a file rewritten
    assert second["score"] == first["score"] and second["variant"] == first["variant"]

    # the cache changes the time to load, not a score: the same graphs built here without it
    monkeypatch.setenv(graph_cache.ENV, "off")
    base = load_predictor(model)
    uncached = OrtPredictor(base, build_int8_encoder(base, threads=1)).predict(a, b)["score"]
    assert uncached.tolist() == first["score"]


def test_fp32_onnx_from_the_cache_equals_a_fresh_export(model: Path, cache: Path) -> None:
    a, b = _texts(60, seed=6)
    base = load_predictor(model)
    built = OrtPredictor(base, build_encoder(base, threads=1)).predict(a, b)["score"]
    entry = _entry(cache)
    assert (entry / "fp32.onnx").is_file() and (entry / "ort-fp32.onnx").is_file()
    stamps = _files(cache)
    again = OrtPredictor(base, build_encoder(base, threads=1))
    assert _files(cache) == stamps and again.variant == "cls-last-layer"
    np.testing.assert_array_equal(again.predict(a, b)["score"], built)


@pytest.mark.parametrize("damage", ["truncate", "overwrite", "manifest"])
@pytest.mark.parametrize("name", [f"{INT8}.onnx", f"ort-{INT8}.onnx", "fp32.onnx"])
def test_a_damaged_cache_file_is_rebuilt(model: Path, cache: Path, name: str, damage: str) -> None:
    a, b = _texts(30, seed=7)
    base = load_predictor(model)
    want = OrtPredictor(base, build_int8_encoder(base, threads=1)).predict(a, b)["score"]
    entry = _entry(cache)
    target = entry / name
    if damage == "truncate":
        target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    elif damage == "overwrite":
        target.write_bytes(b"\x00" * target.stat().st_size)
    else:
        (entry / f"{name}.{graph_cache.MANIFEST}").write_text("{not json")
    # what is built from the damaged file goes too: a whole later graph is loaded without reading it
    later = {
        "fp32.onnx": [f"{INT8}.onnx", f"ort-{INT8}.onnx"],
        f"{INT8}.onnx": [f"ort-{INT8}.onnx"],
    }
    for other in later.get(name, []):
        (entry / other).unlink()
    got = OrtPredictor(base, build_int8_encoder(base, threads=1)).predict(a, b)["score"]
    np.testing.assert_array_equal(got, want)
    assert graph_cache.read(entry, name) is not None  # rewritten whole, manifest and all


def test_a_changed_model_gets_its_own_entry(tmp_path: Path, cache: Path) -> None:
    one = save_tiny_model(tmp_path / "one", kind="cross", seed=0)
    two = save_tiny_model(tmp_path / "two", kind="cross", seed=1)
    assert graph_cache.entry(one, "cross") != graph_cache.entry(two, "cross")
    assert graph_cache.entry(one, "cross") == graph_cache.entry(one, "cross")
    assert graph_cache.entry(one, "cross").parent == cache


def test_the_cache_folder_follows_the_home_or_sits_beside_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(graph_cache.ENV, raising=False)
    monkeypatch.delenv("SIMPAIR_HOME", raising=False)
    downloaded = tmp_path / "home" / "registry-cache" / "ab12cd34" / "sts" / "3" / "model"
    assert graph_cache.cache_root(downloaded) == tmp_path / "home" / "graph-cache"
    assert graph_cache.cache_root(tmp_path / "models" / "m") == tmp_path / "models" / ".graph-cache"
    monkeypatch.setenv("SIMPAIR_HOME", str(tmp_path / "h"))
    assert graph_cache.cache_root(tmp_path / "models" / "m") == tmp_path / "h" / "graph-cache"
    monkeypatch.setenv(graph_cache.ENV, "off")
    assert graph_cache.cache_root(downloaded) is None


def test_a_members_graphs_sit_beside_the_whole_model_never_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(graph_cache.ENV, raising=False)
    monkeypatch.delenv("SIMPAIR_HOME", raising=False)
    monkeypatch.delenv(graph_cache.HOME_ENV, raising=False)
    stack = tmp_path / "models" / "stack"
    member = save_tiny_model(stack / "members" / "0-cross", kind="cross")
    (stack / "simpair.json").write_text("{}")  # a composite's folder: its own metadata beside members/
    assert graph_cache.cache_root(member) == tmp_path / "models" / ".graph-cache"
    before = weights_digest(stack)
    # graphs an older release left inside the stack are not the model: its digest does not move
    (stack / "members" / ".graph-cache" / "x").mkdir(parents=True)
    (stack / "members" / ".graph-cache" / "x" / "fp32.onnx").write_bytes(b"graph")
    assert weights_digest(stack) == before


def test_a_files_digest_is_kept_across_processes_while_its_size_and_time_hold(
    tmp_path: Path, cache: Path
) -> None:
    model = save_tiny_model(tmp_path / "m", kind="cross")
    weights = model / "model.safetensors"
    an_hour_ago = time.time_ns() - 3600 * 10**9
    for path in model.rglob("*"):  # files written a moment ago get no memo (the racy rule)
        os.utime(path, ns=(an_hour_ago, an_hour_ago))
    code = (
        "import sys; from simpair.runtime.graph_cache import cache_root; "
        "from simpair.runtime.weights_digest import weights_digest as d; "
        "print(d(sys.argv[1], cache_root(sys.argv[1])))"
    )

    def fresh() -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, str(model)], capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    first = fresh()
    memos = sorted((cache / MEMO_FOLDER).glob("*.json"))
    assert memos and first == weights_digest(model)  # the same digest as hashing without a memo
    # a memo is trusted while the file's size and time hold: a forged one shows it was read, not hashed
    [memo] = [m for m in memos if json.loads(m.read_text())["path"] == str(weights.resolve())]
    record = json.loads(memo.read_text())
    memo.write_text(json.dumps({**record, "digest": "0" * 32}))
    assert fresh() != first
    # the same size at a new time is hashed again, whatever the memo says
    weights.write_bytes(weights.read_bytes())
    os.utime(weights, ns=(an_hour_ago, an_hour_ago + 10**9))
    assert fresh() == first
    # what is written into a model folder after training (the verdict, the reference) is not the model
    (model / "precision_verdict.json").write_text("{}")
    (model / "monitor" / "reference").mkdir(parents=True)
    (model / "monitor" / "reference" / "profile.json").write_text("{}")
    assert weights_digest(model) == first


def test_score_with_home_keeps_a_local_models_graphs_under_that_home(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`simpair score --home H --model ./folder` put its graphs beside the folder, not in H."""
    monkeypatch.delenv(graph_cache.ENV, raising=False)
    monkeypatch.delenv("SIMPAIR_HOME", raising=False)
    local = tmp_path / "models" / "cross"
    shutil.copytree(model, local)
    write_batch(make_pairs(20, seed=11), tmp_path / "inbox" / "b.parquet")
    home = tmp_path / "home"
    argv = ["score", "--no-prefect", "--inbox", str(tmp_path / "inbox"), "--out", str(tmp_path / "out"),
            "--model", str(local), "--home", str(home), "--backend", "onnx",
            "--precision", "fp32"]  # fmt: skip
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 0, done.output
    [folder] = [f for f in (home / "graph-cache").iterdir() if f.name != MEMO_FOLDER]
    assert (folder / "fp32.onnx").is_file()
    assert not (local.parent / ".graph-cache").exists()
    assert graph_cache.HOME_ENV not in os.environ  # the next command's cache is where it was
    assert graph_cache.cache_root(local) == local.parent / ".graph-cache"


@pytest.mark.skipif(not openvino_backend.available(), reason="openvino not installed")
def test_openvino_compiles_once_and_a_damaged_blob_is_compiled_again(model: Path, cache: Path) -> None:
    a, b = _texts(30, seed=8)
    base = load_predictor(model)
    want = OrtPredictor(base, openvino_backend.build_encoder(base, 1, "f32")).predict(a, b)["score"]
    blobs = [p for p in _entry(cache).glob("openvino/*") if p.is_file()]
    assert blobs, "OpenVINO kept no compiled model"
    stamps = _files(cache)
    again = OrtPredictor(base, openvino_backend.build_encoder(base, 1, "f32")).predict(a, b)["score"]
    assert _files(cache) == stamps
    np.testing.assert_array_equal(again, want)
    for blob in blobs:
        blob.write_bytes(b"\x00" * 64)
    damaged = OrtPredictor(base, openvino_backend.build_encoder(base, 1, "f32")).predict(a, b)["score"]
    np.testing.assert_array_equal(damaged, want)


def test_the_fp32_recheck_is_built_when_a_pair_first_falls_in_its_band(model: Path) -> None:
    a, b = _texts(40, seed=9)
    fast = load_predictor(model)
    builds: list[int] = []

    def exact() -> object:
        builds.append(1)
        return load_predictor(model)

    raw = fast.predict_raw(a, b)
    far = float(np.min(np.abs(raw - recheck.raw_cut(fast)))) / 2  # a band no pair falls in
    lazy = recheck.ThresholdRecheck(fast, exact, far)
    np.testing.assert_array_equal(lazy.predict_raw(a, b), raw)
    assert not lazy.exact_built and builds == [] and lazy.rechecked == 0
    wide = recheck.ThresholdRecheck(fast, exact, 1e9)
    np.testing.assert_allclose(wide.predict_raw(a, b), raw, atol=1e-6)
    wide.predict_raw(a, b)
    assert wide.exact_built and builds == [1] and wide.rechecked == 2 * len(a)
