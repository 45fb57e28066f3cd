"""`--model` takes the model a team already has: a sentence-transformers folder, a Hugging Face
sequence-classification folder, or a hub id in the local cache (simpair.models.foreign).

The folders are written by sentence-transformers and transformers themselves (tiny random BERTs with
the bundled vocabulary), and simpair's scores are checked against those libraries' own outputs.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

# imported plainly: the dev extra installs it, and without it this module fails to collect (an error,
# never a skip into green), as `shared_data` fails without the raw files
import sentence_transformers as st
import torch
from sentence_transformers import models as st_models
from test_scoring_support import make_pairs, write_batch
from transformers import AutoModel, BertForSequenceClassification
from typer.testing import CliRunner

from simpair.cli import app
from simpair.models import ModelMetadata
from simpair.models.tiny import _bundled_tokenizer, tiny_config
from simpair.runtime.loader import load_predictor
from simpair.runtime.model_ref import NoModel, resolve_model_ref

A = ["A man plays a guitar.", "Stocks fell sharply on Monday.", "x", "Ünïcode façade — naïve café."]
B = ["Someone is playing an instrument.", "The market went down a lot.", "y z", "A cat sat on the mat."]


def _body(path: Path, seed: int = 0) -> Path:
    tokenizer = _bundled_tokenizer()
    torch.manual_seed(seed)
    AutoModel.from_config(tiny_config(len(tokenizer))).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _sentence_transformer(root: Path, name: str, pooling: str = "mean", extra: list | None = None) -> Path:
    body = _body(root / f"{name}-body")
    modules = [st_models.Transformer(str(body)), st_models.Pooling(32, pooling), *(extra or [])]
    st.SentenceTransformer(modules=modules, device="cpu").save(str(root / name))
    return root / name


def _classifier(root: Path, name: str, labels: int, seed: int = 1) -> Path:
    tokenizer = _bundled_tokenizer()
    torch.manual_seed(seed)
    BertForSequenceClassification(tiny_config(len(tokenizer), num_labels=labels)).save_pretrained(root / name)
    tokenizer.save_pretrained(root / name)
    return root / name


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("foreign")
    return {
        "st-mean": _sentence_transformer(root, "st-mean", "mean", [st_models.Normalize()]),
        "st-cls": _sentence_transformer(root, "st-cls", "cls"),
        "cross-1": _classifier(root, "cross-1", 1),
        "cross-2": _classifier(root, "cross-2", 2),
    }


def _st_cosines(folder: Path) -> np.ndarray:
    model = st.SentenceTransformer(str(folder), device="cpu")
    ea, eb = model.encode(A, convert_to_tensor=True), model.encode(B, convert_to_tensor=True)
    return model.similarity_pairwise(ea, eb).numpy()


@pytest.mark.parametrize("shape", ["st-mean", "st-cls"])
def test_a_sentence_transformers_folder_scores_as_sentence_transformers(
    shape: str, folders: dict[str, Path], tmp_path: Path
) -> None:
    ref = resolve_model_ref(str(folders[shape]), tmp_path / "home")
    assert (ref.kind, ref.task) == ("bi", "sts")
    adopted = Path(ref.local_dir)
    assert adopted.parent == tmp_path / "home" / "imported"
    meta = ModelMetadata.read(adopted)
    assert meta.pooling == shape.removeprefix("st-") and meta.imported["shape"] == "sentence-transformers"
    # the weights are linked, not copied
    assert (adopted / "model.safetensors").stat().st_ino == (
        folders[shape] / "model.safetensors"
    ).stat().st_ino
    predictor = load_predictor(adopted)
    want = _st_cosines(folders[shape])
    np.testing.assert_allclose(predictor.predict_raw(A, B), want, atol=1e-5, rtol=0)
    np.testing.assert_allclose(predictor.predict(A, B)["score"], np.clip(want, 0, 1), atol=1e-5, rtol=0)
    # the adopted folder is itself a sentence-transformers model giving the same embeddings
    np.testing.assert_allclose(_st_cosines(adopted), want, atol=1e-5, rtol=0)
    again = resolve_model_ref(str(folders[shape]), tmp_path / "home")
    assert (again.local_dir, again.version) == (ref.local_dir, ref.version)  # adopted once, found again


@pytest.mark.parametrize("labels", [1, 2])
def test_a_classifier_folder_scores_as_transformers_sigmoid_or_softmax(
    labels: int, folders: dict[str, Path], tmp_path: Path
) -> None:
    folder = folders[f"cross-{labels}"]
    ref = resolve_model_ref(str(folder), tmp_path / "home")
    assert (ref.kind, ref.task) == ("cross", "paraphrase")
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(**_bundled_tokenizer()(A, B, padding=True, return_tensors="pt")).logits
    want = torch.sigmoid(logits[:, 0]) if labels == 1 else torch.softmax(logits, dim=-1)[:, 1]
    out = load_predictor(ref.local_dir).predict(A, B)
    np.testing.assert_allclose(out["probability"], want.numpy(), atol=1e-5, rtol=0)
    assert "label" not in out  # imported without a dev file: no threshold, so no label


def test_a_two_label_head_exports_to_onnx_as_one_logit(folders: dict[str, Path], tmp_path: Path) -> None:
    """The ONNX path exports the module: the [CLS]-only rewrite must read two labels as the model does."""
    from simpair.runtime.onnx_backend import use_onnx

    torch.set_num_threads(1)
    ref = resolve_model_ref(str(folders["cross-2"]), tmp_path / "home")
    want = load_predictor(ref.local_dir).predict(A, B)["score"]
    predictor = use_onnx(load_predictor(ref.local_dir), threads=1)
    assert predictor.variant == "cls-last-layer"
    np.testing.assert_allclose(predictor.predict(A, B)["score"], want, atol=1e-5, rtol=0)


def test_a_given_task_is_kept(folders: dict[str, Path], tmp_path: Path) -> None:
    ref = resolve_model_ref(str(folders["st-mean"]), tmp_path / "home", task="paraphrase")
    assert ref.task == "paraphrase"
    out = load_predictor(ref.local_dir).predict(A, B)
    assert "probability" in out and "label" not in out


def test_unsupported_shapes_are_refused_in_one_line(folders: dict[str, Path], tmp_path: Path) -> None:
    home = tmp_path / "home"
    maxed = _sentence_transformer(tmp_path, "st-max", "max")
    with pytest.raises(NoModel, match=r"st-max: pooling max \(1_Pooling/config.json\) not supported"):
        resolve_model_ref(str(maxed), home)
    dense = _sentence_transformer(tmp_path, "st-dense", "mean", [st_models.Dense(32, 8)])
    with pytest.raises(
        NoModel, match=r"st-dense: sentence-transformers module\(s\) Dense \(2_Dense\) not supported"
    ):
        resolve_model_ref(str(dense), home)
    three = _classifier(tmp_path, "nli", 3)
    with pytest.raises(NoModel, match="a classifier with 3 labels"):
        resolve_model_ref(str(three), home)
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoModel, match="not a saved model"):
        resolve_model_ref(str(tmp_path / "empty"), home)
    assert not (home / "imported").exists() or not any((home / "imported").iterdir())


def test_a_hub_id_in_the_local_cache_resolves_offline(
    folders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache layout huggingface_hub writes: blobs, snapshots/<revision>/ of symlinks, refs/main."""
    hf_home = tmp_path / "hf"
    repo = hf_home / "hub" / "models--acme--tiny-st"
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / revision
    for path in folders["st-mean"].rglob("*"):
        if path.is_file():
            blob = repo / "blobs" / f"{abs(hash(str(path))):x}"
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(path.read_bytes())
            link = snapshot / path.relative_to(folders["st-mean"])
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ref = resolve_model_ref("acme/tiny-st", tmp_path / "home")
    meta = ModelMetadata.read(Path(ref.local_dir))
    assert (ref.kind, meta.backbone, meta.imported["revision"]) == ("bi", "acme/tiny-st", revision)
    np.testing.assert_allclose(
        load_predictor(ref.local_dir).predict_raw(A, B), _st_cosines(folders["st-mean"]), atol=1e-5
    )
    with pytest.raises(NoModel, match="not in the local Hugging Face cache"):
        resolve_model_ref("acme/not-cached", tmp_path / "home")


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), terminal_width=200)
    return result.exit_code, result.output


def test_predict_takes_a_sentence_transformers_folder(folders: dict[str, Path], tmp_path: Path) -> None:
    code, output = _cli(
        "predict", "A man plays a guitar.", "Someone is playing an instrument.",
        "--model", str(folders["st-mean"]), "--home", str(tmp_path / "home"),
    )  # fmt: skip
    assert code == 0, output
    assert "bi-encoder" in output and "score" in output


def test_score_no_prefect_takes_foreign_folders(folders: dict[str, Path], tmp_path: Path) -> None:
    """A sentence-transformers folder scores a batch; a classifier with no threshold leaves `label` empty."""
    inbox = tmp_path / "inbox"
    table = make_pairs(60, seed=3)
    write_batch(table, inbox / "batch.parquet")
    home = str(tmp_path / "home")
    for shape in ("st-mean", "cross-2"):
        out = tmp_path / f"out-{shape}"
        code, output = _cli(
            "score", "--inbox", str(inbox), "--out", str(out), "--model", str(folders[shape]),
            "--home", home, "--no-prefect",
        )  # fmt: skip
        assert code == 0, output
        [path] = list(out.glob("date=*/batch-*.parquet"))
        scored = pl.read_parquet(path)
        assert scored.height == 60 and scored["score"].null_count() == 0
        if shape == "cross-2":
            assert scored["label"].null_count() == 60 and scored["probability"].null_count() == 0
            flat = " ".join(output.split())
            assert "no threshold (no dev file): probability only, label left empty" in flat
            assert "auto: fp32 (no precision verdict: imported without a dev file)" in flat
    summary = json.loads(
        (tmp_path / "home" / "imported")
        .joinpath(
            next(p.name for p in (tmp_path / "home" / "imported").iterdir() if p.name.startswith("cross-2")),
            "simpair.json",
        )
        .read_text()
    )
    assert summary["objective"] == "imported" and summary["threshold_chosen"] is False


def test_a_sentence_transformers_cross_encoder_scores_as_its_predict(tmp_path: Path) -> None:
    """`CrossEncoder(...).save(dir)` (sentence-transformers 6.x: one Transformer module whose task is
    sequence-classification) is read as the classifier it wraps, with its sigmoid."""
    _classifier(tmp_path, "head", 1, seed=4)
    model = st.CrossEncoder(str(tmp_path / "head"), device="cpu")
    model.save(str(tmp_path / "ce"))
    ref = resolve_model_ref(str(tmp_path / "ce"), tmp_path / "home")
    assert (ref.kind, ref.task) == ("cross", "paraphrase")
    assert ModelMetadata.read(Path(ref.local_dir)).imported["shape"] == "cross-encoder"
    want = model.predict(list(zip(A, B, strict=True)), activation_fn=torch.nn.Sigmoid())
    out = load_predictor(ref.local_dir).predict(A, B)
    np.testing.assert_allclose(out["probability"], want, atol=1e-5, rtol=0)
    # an activation that is not simpair's reading of the logits is refused in one line
    settings = tmp_path / "ce" / "config_sentence_transformers.json"
    config = json.loads(settings.read_text())
    config["activation_fn"] = "torch.nn.modules.activation.Tanh"
    settings.write_text(json.dumps(config))
    with pytest.raises(NoModel, match=r"ce: cross-encoder activation Tanh with 1 label\(s\) not supported"):
        resolve_model_ref(str(tmp_path / "ce"), tmp_path / "home2")


def _adopt_at_once(folder: str, home: str, delay: float, barrier: Any, results: Any) -> None:
    """One of several processes adopting the same folder: all check for it before any has made it."""
    import time

    from simpair.models import foreign

    link = foreign.link_file

    def slow_link(source: Path, target: Path) -> str:  # after the check for the folder, before the commit
        time.sleep(delay)
        return link(source, target)

    foreign.link_file = slow_link  # type: ignore[assignment]
    barrier.wait()
    try:
        ref = resolve_model_ref(folder, Path(home))
        results.put((ref.local_dir, ref.version, sorted(p.name for p in Path(ref.local_dir).iterdir())))
    except Exception as exc:  # reported to the test, which fails on it
        results.put(repr(exc))


def test_processes_adopting_the_same_model_at_once_share_one_folder(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    """The last to finish used to swap out (and delete) the folder the others were reading, and each got
    its own `imported_at`, so its own local version; now the first folder in stays."""
    ctx = multiprocessing.get_context("fork")
    delays = [0.0, 0.0, 1.1]  # the last one commits in a later second than the first
    barrier, results = ctx.Barrier(len(delays)), ctx.Queue()
    home = tmp_path / "home"
    procs = [
        ctx.Process(target=_adopt_at_once, args=(str(folders["cross-1"]), str(home), d, barrier, results))
        for d in delays
    ]
    for proc in procs:
        proc.start()
    got = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    assert all(isinstance(g, tuple) for g in got), got
    assert len({g[:2] for g in got}) == 1, got
    assert [p.name for p in (home / "imported").iterdir()] == [Path(got[0][0]).name]  # no temporaries left


def test_a_distilbert_encoder_gets_its_embedding_width(tmp_path: Path) -> None:
    """DistilBERT's config.json says `dim`, not `hidden_size`: the pooling config used to say 0."""
    from transformers import DistilBertConfig, DistilBertModel

    tokenizer = _bundled_tokenizer()
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=1, n_heads=2, hidden_dim=64)
    DistilBertModel(config).save_pretrained(tmp_path / "distil")
    tokenizer.save_pretrained(tmp_path / "distil")
    ref = resolve_model_ref(str(tmp_path / "distil"), tmp_path / "home")
    pooling = json.loads((Path(ref.local_dir) / "1_Pooling" / "config.json").read_text())
    assert pooling["word_embedding_dimension"] == 32
    assert st.SentenceTransformer(ref.local_dir, device="cpu").get_sentence_embedding_dimension() == 32
