"""`simpair.atomic`: a target is the old version or the new one, never half; temporaries never linger."""

from __future__ import annotations

from pathlib import Path

import pytest

from simpair.atomic import atomic_path, atomic_write_text, commit


def test_file_write_replaces_the_target_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two", durable=True)
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


def test_a_failed_write_keeps_the_old_target_and_removes_the_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_folder_write_swaps_a_full_folder_and_fills_an_empty_one(tmp_path: Path) -> None:
    target = tmp_path / "model"
    target.mkdir()  # reserved, empty (as new_model_dir leaves it)
    with atomic_path(target, directory=True) as tmp:
        (tmp / "a").write_text("1")
    with atomic_path(target, directory=True, prefix=".tmp-") as tmp:
        assert tmp.name.startswith(".tmp-model")
        (tmp / "b").write_text("2")
    assert sorted(p.name for p in target.iterdir()) == ["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_commit_moves_a_temporary_made_elsewhere(tmp_path: Path) -> None:
    staging = tmp_path / ".staging"
    (staging / "inner").mkdir(parents=True)
    (staging / "inner" / "f").write_text("x")
    commit(staging / "inner", tmp_path / "final", durable=True)
    assert (tmp_path / "final" / "f").read_text() == "x"
