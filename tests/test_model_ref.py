"""`resolve_model_ref`: one resolver for a model folder, a registry ref, or the default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simpair.runtime.model_ref import NoModel, resolve_model_ref


def _fake_model(path: Path, kind: str = "cross", task: str = "paraphrase") -> Path:
    path.mkdir(parents=True)
    (path / "simpair.json").write_text(f'{{"kind": "{kind}", "task": "{task}"}}')
    (path / "model.safetensors").write_bytes(b"0" * 10)
    return path


def test_a_model_folder_is_pinned_by_a_hash_of_its_files(tmp_path: Path) -> None:
    folder = _fake_model(tmp_path / "m", kind="bi", task="sts")
    ref = resolve_model_ref(str(folder), tmp_path / "home")
    assert (ref.name, ref.kind, ref.task, ref.local_dir) == ("m", "bi", "sts", str(folder.resolve()))
    assert (
        ref.version.startswith("local-") and ref.version == resolve_model_ref(str(folder), tmp_path).version
    )
    (folder / "model.safetensors").write_bytes(b"0" * 11)
    assert resolve_model_ref(str(folder), tmp_path).version != ref.version


def test_no_spec_means_the_newest_saved_model_when_asked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(NoModel, match="no trained model under"):
        resolve_model_ref(None, home, when_none="latest")
    old = _fake_model(home / "models" / "old")
    new = _fake_model(home / "models" / "new")
    os.utime(old / "simpair.json", (1, 1))
    assert resolve_model_ref(None, home, when_none="latest").local_dir == str(new.resolve())


def test_a_folder_without_metadata_is_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(LookupError, match="not a saved model"):
        resolve_model_ref(str(tmp_path / "empty"), tmp_path)


@pytest.mark.parametrize("spec", ["/no/such/model", "./missing-model", "~/missing-model", "a/b/c"])
def test_a_path_that_is_not_there_says_so(tmp_path: Path, spec: str) -> None:
    """A mistyped folder is named as a missing folder, not parsed as a registry `name/version`."""
    with pytest.raises(NoModel, match="no such folder"):
        resolve_model_ref(spec, tmp_path)


def test_a_file_is_not_a_model_folder(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(NoModel, match="a file, not a model folder"):
        resolve_model_ref(str(tmp_path / "weights.bin"), tmp_path)
