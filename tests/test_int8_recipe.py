"""The int8 recipe a host builds: 8-bit weights where the CPU multiplies uint8 by int8 without
overflow (VNNI, ARM), 7-bit weights on x86 CPUs without VNNI, whose kernel sums two products in 16
bits and would clip them. Either graph is per-row, so batch-invariant, and close to fp32.

Real exported graphs of a tiny cross-encoder in real ONNX Runtime sessions; the flags are passed in,
since this machine has VNNI and cannot show the other case's kernel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import test_scoring_support as support
from onnx import TensorProto, numpy_helper
from test_scoring_support import make_pairs

from simpair.models.device import host_facts, pick_device
from simpair.models.int8_check import INT8_GRAPH, INT8_GRAPH_7BIT, int8_graph, weight_levels
from simpair.runtime import graph_cache, int8_backend
from simpair.runtime.int8_backend import build_int8_encoder, quantize_per_row
from simpair.runtime.loader import load_for_run, load_predictor
from simpair.runtime.onnx_backend import cache_entry, fp32_graph, session_options
from simpair.runtime.options import ForwardPin, RuntimeOptions

tiny_cross = support.tiny_cross


@pytest.mark.parametrize(
    ("flags", "machine", "recipe"),
    [
        ({"avx2", "avx512f", "avx512_vnni"}, "x86_64", INT8_GRAPH),  # Cascade Lake and later, Zen 4
        ({"avx2", "avx_vnni"}, "x86_64", INT8_GRAPH),  # Alder Lake and later without AVX-512
        ({"avx2", "amx_int8", "amx_tile"}, "x86_64", INT8_GRAPH),
        ({"avx2", "fma"}, "x86_64", INT8_GRAPH_7BIT),  # Haswell to Zen 3
        ({"avx2", "avx512f", "avx512bw"}, "AMD64", INT8_GRAPH_7BIT),  # Skylake-SP: AVX-512, no VNNI
        (set(), "x86_64", INT8_GRAPH_7BIT),  # flags unreadable: the recipe that cannot overflow
        (set(), "aarch64", INT8_GRAPH),
    ],
)
def test_the_recipe_follows_the_cpu(flags: set[str], machine: str, recipe: str) -> None:
    assert int8_graph(flags, machine) == recipe
    assert weight_levels(recipe) == (63 if recipe == INT8_GRAPH_7BIT else 127)


def test_a_verdict_records_this_hosts_recipe() -> None:
    assert host_facts(pick_device("cpu"))["int8_graph"] == int8_graph()


def _int8_weights(path: Path) -> list[np.ndarray]:
    model = onnx.load(str(path))
    return [numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == TensorProto.INT8]


def _run(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(str(path), session_options(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})[0]


def test_seven_bit_weights_stay_within_63_batch_invariant_and_near_fp32(
    tiny_cross: Path, tmp_path: Path, one_thread: None
) -> None:
    predictor = load_predictor(str(tiny_cross), precision="fp32")
    graph, _ = fp32_graph(predictor, 1, tmp_path)
    eight = quantize_per_row(graph, tmp_path / "int8.onnx", weight_levels(INT8_GRAPH))
    seven = quantize_per_row(graph, tmp_path / "int7.onnx", weight_levels(INT8_GRAPH_7BIT))
    for path, top in ((eight, 127), (seven, 63)):
        weights = _int8_weights(path)
        assert weights and all(int(np.abs(w).max()) == top for w in weights)  # every matrix reaches it

    table = make_pairs(48, seed=5)
    enc = predictor.tokenizer(
        table.column("text_a").to_pylist(), table.column("text_b").to_pylist(),
        padding=True, truncation=True, max_length=64, return_tensors="np",
    )  # fmt: skip
    feeds = {k: np.asarray(v, dtype=np.int64) for k, v in enc.items()}
    exact = _run(graph, feeds)
    for path in (eight, seven):
        together = _run(path, feeds)
        alone = np.concatenate([_run(path, {k: v[i : i + 1] for k, v in feeds.items()}) for i in range(3)])
        np.testing.assert_array_equal(together[:3], alone)  # a pair's score is its own, whatever its batch
        assert float(np.abs(together - exact).max()) < 0.1  # logits of order 1: int8's rounding, no more
        assert not np.array_equal(together, exact)
    assert not np.array_equal(_run(eight, feeds), _run(seven, feeds))  # two recipes, two graphs


def test_each_recipe_has_its_own_cached_graph(
    tiny_cross: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    """A home shared by CPUs with and without VNNI keeps both graphs, each under its recipe's name
    (the flags are forced: this machine has VNNI)."""
    monkeypatch.setenv(graph_cache.ENV, str(tmp_path / "graph-cache"))
    predictor = load_predictor(str(tiny_cross), precision="fp32")
    entry = cache_entry(predictor)
    for recipe in (INT8_GRAPH, INT8_GRAPH_7BIT):
        monkeypatch.setattr(int8_backend, "int8_graph", lambda recipe=recipe: recipe)
        build_int8_encoder(predictor, 1)
    for name, top in (("int8-per-row.onnx", 127), ("int8-per-row-7bit.onnx", 63)):
        weights = _int8_weights(entry / name)
        assert weights and max(int(np.abs(w).max()) for w in weights) == top, name


def test_a_worker_that_builds_another_int8_recipe_refuses(tiny_cross: Path) -> None:
    """A run judged on one recipe is scored on it: a worker whose CPU builds the other one (a Dask
    worker without VNNI under a driver with it) refuses rather than score with weights nothing measured."""
    other = INT8_GRAPH_7BIT if int8_graph() == INT8_GRAPH else INT8_GRAPH
    run = RuntimeOptions(threads=1, backend="auto", pin=ForwardPin(precision="int8", int8_graph=other))
    with pytest.raises(RuntimeError, match="pinned to the int8 graph"):
        load_for_run(str(tiny_cross), run, "int8")
    here = RuntimeOptions(
        threads=1, backend="auto", pin=ForwardPin(precision="int8", int8_graph=int8_graph())
    )
    assert load_for_run(str(tiny_cross), here, "int8").precision == "int8"
