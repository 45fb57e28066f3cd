"""Model pinning against a real MLflow SQLite registry: a promotion between chunks changes nothing.

Two tiny models are registered as versions 1 and 2 of `simpair-paraphrase`; the test moves
`champion` from 1 to 2 from the run's own between-chunks callback, exactly as a nightly retrain
finishing mid-run would, then checks every scored row against version 1's predictor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_scoring_support import assert_exactly_once, make_pairs, read_outputs, write_batch

from simpair.models import save_tiny_model
from simpair.registry import registry
from simpair.registry.record import RegisteredVersion, register_trained_model
from simpair.runtime.loader import load_predictor
from simpair.scoring import score_inbox
from simpair.scoring.chunk import ChunkResult

NAME = "simpair-paraphrase"
pytestmark = pytest.mark.slow


def _register(home: Path, tmp: Path, seed: int) -> tuple[RegisteredVersion, Path]:
    model_dir = save_tiny_model(tmp / f"tiny-{seed}", task="paraphrase", kind="cross", seed=seed)
    (model_dir / "metrics.json").write_text('{"dev": {"accuracy": 0.5}}\n')
    version = register_trained_model(home, model_dir, {"name": f"tiny-{seed}"}, {"dev_accuracy": 0.5})
    return version, model_dir


def _promote(home: Path, version: str, reason: str) -> None:
    registry.move_champion(registry.client(home), NAME, version, reason=reason, by="test", action="promote")


def test_alias_resolved_once_promotion_between_chunks_does_not_change_version(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mlflow.set_tracking_uri exports MLFLOW_TRACKING_URI: pin it to this test's store, restored after
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{home / 'mlflow' / 'mlflow.db'}")
    v1, dir1 = _register(home, tmp_path, seed=0)
    v2, dir2 = _register(home, tmp_path, seed=1)
    assert (v1.version, v2.version) == ("1", "2")
    _promote(home, v1.version, "first champion")

    inbox, out = tmp_path / "inbox", tmp_path / "out"
    table = make_pairs(1200, seed=20)
    write_batch(table, inbox / "night1.parquet")
    promotions: list[int] = []

    def promote_after_first_chunk(result: ChunkResult) -> None:
        if not promotions:  # the nightly retrain promotes while scoring runs
            _promote(home, v2.version, "better model mid-run")
            promotions.append(result.idx)

    summary = score_inbox(
        str(inbox), out, f"{NAME}@champion", home, chunk_rows=300, on_chunk_done=promote_after_first_chunk
    )
    assert promotions == [0]
    assert registry.resolve_model(f"{NAME}@champion", home).version == v2.version  # the alias did move
    assert (summary.model_name, summary.model_version) == (NAME, "1")

    output = read_outputs(out)
    assert_exactly_once(table, output)
    assert set(output.column("model_version").to_pylist()) == {"1"}
    assert set(output.column("model_run_id").to_pylist()) == {v1.run_id}
    texts = table.column("text_a").to_pylist(), table.column("text_b").to_pylist()
    want = load_predictor(dir1).predict(*texts)["score"]
    other = load_predictor(dir2).predict(*texts)["score"]
    got = output.column("score").to_numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.abs(got - other).max() > 1e-3  # version 2 would have given other scores

    # the next run resolves the alias again and gets the new champion
    write_batch(make_pairs(200, seed=21, prefix="n"), inbox / "night2.parquet")
    second = score_inbox(str(inbox), out, f"{NAME}@champion", home, chunk_rows=300)
    assert (second.model_version, second.files_scored, second.files_skipped) == ("2", 1, 1)

    # an explicit version overrides the alias
    third = score_inbox(str(inbox), tmp_path / "out-v1", f"{NAME}/1", home, chunk_rows=300)
    assert third.model_version == "1" and third.files_scored == 2
