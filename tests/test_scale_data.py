"""The scale benchmark's synthetic STS-B files: the layout, the malformed share, no accidental duplicates."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from simpair.contracts import load_contract

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import scale_data  # noqa: E402
import scale_measure  # noqa: E402

pytestmark = pytest.mark.skipif(not scale_data.STSB_TRAIN.exists(), reason="STS-B raw files not present")


def _lines(out: Path) -> dict[str, list[list[str]]]:
    folder = out / "sources" / scale_data.DATASET
    return {
        p.stem.split("-")[-1]: [ln.split("\t") for ln in p.read_text().splitlines()] for p in folder.iterdir()
    }


def test_files_split_contract_and_malformed_share(tmp_path: Path) -> None:
    manifest = scale_data.generate(20_000, tmp_path)
    files = _lines(tmp_path)
    assert {k: len(v) for k, v in files.items()} == {"train": 16_000, "dev": 2_000, "test": 2_000}
    assert manifest["raw_lines"] == 20_000
    broken = sum(manifest["malformed"].values())
    assert 50 <= broken <= 160  # 0.5% of 20k is 100
    assert all(n > 0 for n in manifest["malformed"].values())  # every kind occurs
    rows = [f for split in files.values() for f in split]
    well = [f for f in rows if len(f) in (7, 9)]
    assert Counter(len(f) for f in well)[9] > 0  # the licence columns of some source lines
    ids = Counter(f[3] for f in rows if len(f) >= 4)
    assert ids.most_common(1)[0][1] == 1  # ids unique across all files, malformed lines included
    contract = load_contract(Path(manifest["contract"]))
    assert contract.dataset == scale_data.DATASET
    assert [f.pattern for f in contract.files] == [f"synth/synth-{s}.tsv" for s in ("train", "dev", "test")]


def test_pairs_repeat_only_where_meant(tmp_path: Path) -> None:
    manifest = scale_data.generate(30_000, tmp_path)
    pairs = Counter(
        frozenset((f[5], f[6])) for split in _lines(tmp_path).values() for f in split if len(f) in (7, 9)
    )
    repeated = sum(n - 1 for n in pairs.values() if n > 1)
    meant = manifest["malformed"]["duplicate"] + manifest["malformed"]["swapped_duplicate"]
    assert repeated <= meant  # recombination never repeats a pair by chance (a copy may itself be broken)
    assert repeated >= meant // 2


def test_deterministic(tmp_path: Path) -> None:
    scale_data.generate(5_000, tmp_path / "a")
    scale_data.generate(5_000, tmp_path / "b")
    for name in ("synth-train.tsv", "synth-dev.tsv", "synth-test.tsv"):
        a = (tmp_path / "a" / "sources" / "synth" / name).read_bytes()
        assert a == (tmp_path / "b" / "sources" / "synth" / name).read_bytes()


def test_measure_reports_the_child_not_the_parent(tmp_path: Path) -> None:
    ballast = bytearray(300 * 2**20)  # this process is large; the measured child must not inherit its peak
    ballast[:: 2**12] = b"x" * len(ballast[:: 2**12])  # touched, so resident
    small = scale_measure.measure([sys.executable, "-c", "pass"], tmp_path / "small.log")
    fill = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"
    big = scale_measure.measure([sys.executable, "-c", fill], tmp_path / "big.log")
    del ballast
    assert small["rc"] == 0 and big["rc"] == 0
    assert small["peak_rss_mb"] < 100
    assert 200 < big["peak_rss_mb"] < 300


def test_fit_recovers_a_line() -> None:
    sizes = {
        str(n): {
            "rows": n,
            "steps": {"x": {"rc": 0, "wall_s": 1 + n * 2e-6, "cpu_s": 1.0, "peak_rss_mb": 100.0}},
        }
        for n in (100_000, 1_000_000, 4_000_000)
    }
    f = scale_measure.fit(sizes)["x"]
    assert f["wall_s"]["per_row"] == pytest.approx(2e-6)
    assert f["wall_s"]["at_100M"] == pytest.approx(201, abs=0.1)
    assert abs(f["peak_rss_mb"]["per_row"]) < 1e-6  # flat memory fits as ~0 bytes per row
