"""`simpair encode` and `simpair mine` take `--precision auto|fp32|bf16|int8`, auto by default, decided
once per model by the same `resolve.resolve` as `simpair score`.

A tiny bi-encoder records the toy dataset's dev split (ingested into the test's home); its precision
verdict is measured for real, then pinned to int8 (so the choice does not hang on this machine's
timing noise): auto must then encode in int8 and say why, an explicit fp32 must give the vectors
encoding gave before precisions existed (fp32), and an int8 the guard refuses must stop with one line.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from test_precision_ladder import _knife_edge
from test_scoring_int8 import _ingest_toy
from test_scoring_support import make_pairs
from typer.testing import CliRunner

from simpair.cli import app
from simpair.mining.encode import embedding_matrix, read_encode_metadata
from simpair.models import save_tiny_model
from simpair.models.metadata import ModelMetadata
from simpair.models.precision_verdict import VERDICT_FILE
from simpair.runtime.loader import load_predictor
from simpair.selection import precision_ladder as ladder


def _bi_with_dev(path: Path, dev_ids: list[str], threshold: float = 0.5) -> Path:
    """A tiny paraphrase bi-encoder that records `toy/dev` as its dev split (as training does)."""
    bi = save_tiny_model(path, task="paraphrase", kind="bi", seed=1)
    meta = ModelMetadata.read(bi)
    meta.dev_pair_ids_file, meta.threshold = "dev_pair_ids.txt", threshold
    meta.write(bi)
    (bi / "dev_pair_ids.txt").write_text("\n".join(dev_ids) + "\n")
    (bi / "metrics.json").write_text(json.dumps({"dev": {"f1": 0.5}, "dev_source": "toy/dev"}) + "\n")
    return bi


def _bi_with_int8_verdict(path: Path, home: Path, dev_ids: list[str]) -> Path:
    """`_bi_with_dev` with its verdict measured, then pinned so that its fastest accepted rung is int8."""
    bi = _bi_with_dev(path, dev_ids)
    verdict = ladder.measure(bi, home, threads=1)
    assert verdict.rung("int8").accepted  # threshold 0.5: int8 flips no dev label of this tiny model
    rungs = tuple(
        dataclasses.replace(r, speedup=9.0, speedup_low=9.0) if r.precision == "int8" else r
        for r in verdict.rungs
    )
    dataclasses.replace(verdict, rungs=rungs).write(bi)
    return bi


def _sentences(tmp_path: Path) -> tuple[Path, list[str]]:
    texts = make_pairs(40, seed=36).column("text_a").to_pylist()
    pq.write_table(pa.table({"text": texts}), tmp_path / "sentences.parquet")
    return tmp_path / "sentences.parquet", texts


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), terminal_width=400)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_encode_takes_precision_auto_by_default_and_fp32_gives_todays_vectors(
    home: Path, tmp_path: Path, one_thread: None
) -> None:
    bi = _bi_with_int8_verdict(tmp_path / "bi", home, _ingest_toy(home, tmp_path))
    source, texts = _sentences(tmp_path)
    base = ["encode", "--input", str(source), "--model", str(bi), "--home", str(home), "--threads", "1"]

    printed = _run(*base, "--output", str(tmp_path / "auto.parquet"))
    assert "precision int8: auto: int8 (0.0% flips" in printed  # the verdict's line, as score prints it
    assert read_encode_metadata(tmp_path / "auto.parquet")["precision"] == "int8"

    printed = _run(*base, "--output", str(tmp_path / "fp32.parquet"), "--precision", "fp32")
    assert "precision fp32: asked with --precision" in printed
    assert read_encode_metadata(tmp_path / "fp32.parquet")["precision"] == "fp32"
    fp32 = embedding_matrix(pq.read_table(tmp_path / "fp32.parquet"))
    np.testing.assert_allclose(
        fp32, load_predictor(str(bi), precision="fp32", backend="auto", threads=1).embed(texts), atol=1e-6
    )
    auto = embedding_matrix(pq.read_table(tmp_path / "auto.parquet"))
    assert np.mean(np.all(auto == fp32, axis=1)) < 0.2  # auto really ran the int8 graph


def test_mine_takes_precision_and_an_int8_the_guard_refused_stops_with_one_line(
    home: Path, tmp_path: Path, one_thread: None
) -> None:
    dev_ids = _ingest_toy(home, tmp_path)
    bi = _bi_with_int8_verdict(tmp_path / "bi", home, dev_ids)
    source, _ = _sentences(tmp_path)
    base = ["mine", "--input", str(source), "--model", str(bi), "--home", str(home), "--threads", "1",
            "--top-k", "3"]  # fmt: skip

    printed = _run(*base, "--output", str(tmp_path / "auto.parquet"))
    assert "precision int8: auto: int8 (0.0% flips" in printed
    fp32_args = ["--output", str(tmp_path / "fp32.parquet"), "--precision", "fp32"]
    fp32_args += ["--json", str(tmp_path / "j")]
    assert "precision fp32: asked with --precision" in _run(*base, *fp32_args)
    summary = json.loads((tmp_path / "j").read_text())
    assert summary["precision"] == "fp32" and summary["precision_why"] is None
    # fp32 mines what a model with no verdict mines (fp32, as before precisions were chosen)
    plain = Path(shutil.copytree(bi, tmp_path / "plain"))
    (plain / VERDICT_FILE).unlink()
    (plain / "metrics.json").unlink()
    plain_args = [str(plain) if x == str(bi) else x for x in base]
    printed = _run(*plain_args, "--output", str(tmp_path / "p.parquet"))
    assert "precision fp32: auto: fp32 (no precision verdict" in printed
    want = pq.read_table(tmp_path / "p.parquet")
    mined = [pq.read_table(tmp_path / name) for name in ("auto.parquet", "fp32.parquet")]
    assert mined[1]["score"].to_pylist() == want["score"].to_pylist()
    assert mined[0]["score"].to_pylist() != want["score"].to_pylist()  # int8 moved the scores a little

    # a re-ranker whose threshold is its median dev probability: int8 flips many dev labels, so once its
    # verdict is measured (`simpair models verdict`) an explicit int8 is refused before any work, in one
    # line with the measured flips
    edge = _knife_edge(tmp_path / "edge", dev_ids, home)
    measured = CliRunner().invoke(app, ["models", "verdict", str(edge), "--home", str(home)])
    assert measured.exit_code == 0 and "int8 refused" in measured.output, measured.output
    args = [*base, "--output", str(tmp_path / "x.parquet"), "--precision", "int8", "--rerank", str(edge)]
    refused = CliRunner().invoke(app, args, terminal_width=400)
    assert refused.exit_code == 1 and refused.stdout == "", refused.output
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("error: not started:")]
    assert "int8 refused for edge/" in line and "of dev labels" in line, line
    assert not (tmp_path / "x.parquet").exists()
