"""Adopt a model saved by sentence-transformers or transformers (a folder, or a hub id in the local cache).

A team arrives with the model it already has, not with a simpair model folder. Three shapes are read:

- a **sentence-transformers folder** (`modules.json`): a bi-encoder. `Transformer -> Pooling [->
  Normalize]` with mean or [CLS] pooling is what simpair runs; any other module (`Dense`, `LayerNorm`,
  ...), pooling mode, a default prompt or a non-cosine similarity is refused in one line naming the
  folder and what is unsupported, because the scores would silently differ from the model's own.
- a **Hugging Face sequence classifier** (`config.json` architectures ending in
  `ForSequenceClassification`): a cross-encoder. One logit -> sigmoid, two -> softmax of class 1
  (`simpair.models.cross_encoder.one_logit`); more labels are refused.
- a **plain encoder** (`config.json`, no sentence-transformers files, no classifier head): a bi-encoder
  with mean pooling, the same reading the promotion gate gives an untrained backbone (its zero-shot
  bar). Its scores are only as good as that reading; the adoption says so in `imported.note`.

A hub id (`org/name`) is looked up in the local Hugging Face cache only (never downloaded), then read
as a folder. Adoption writes a simpair model folder under `<home>/imported/<name>-<key>/`: the
weights and tokenizer files hard-linked (else symlinked, else copied), fresh sentence-transformers
module files for bi-encoders, and a `simpair.json` saying what was detected and where it came from.
Everything downstream (scoring, ONNX export, evaluation, registration) then runs unchanged. `<key>`
hashes the source files' names, sizes and modification times, the small JSON files' contents and the
task, so a second run finds the folder at once and a changed source makes a new one; the full content
hash (sha256 of every adopted file) is computed once, at adoption, and kept as provenance.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simpair.atomic import commit, temp_path
from simpair.models.metadata import METADATA_FILE, ModelMetadata

log = logging.getLogger(__name__)

IMPORTED_DIR = "imported"
ADOPTION_FORMAT = "1"
MAX_LENGTH_CAP = 512
# Never adopted: pickled weights (simpair reads safetensors only), sentence-transformers' own module
# files (written afresh for what simpair runs), repository clutter, and names simpair writes itself.
PICKLE_SUFFIXES = {".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".h5", ".msgpack", ".ot", ".onnx"}
SKIPPED_NAMES = {
    "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", METADATA_FILE,
    "precision_verdict.json", "metrics.json", "train_config.yaml", "dev_pair_ids.txt",
}  # fmt: skip
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
ST_SUPPORTED = ("Transformer", "Pooling", "Normalize")


class ForeignModelError(ValueError):
    """A folder or hub id that cannot be adopted; the message names it and what is wrong, in one line."""


@dataclass(frozen=True)
class Detected:
    """What a foreign folder is, as simpair will run it."""

    shape: str  # "sentence-transformers" | "cross-encoder" (sentence-transformers) | "classifier" | "encoder"
    kind: str  # "bi" | "cross"
    weights_dir: Path  # the folder holding config.json, the safetensors weights and the tokenizer
    pooling: str = "mean"
    labels: int = 1
    max_length: int = MAX_LENGTH_CAP
    normalize: bool = False
    note: str = ""

    @property
    def default_task(self) -> str:
        """A classifier decides paraphrase; an embedding model's cosine is graded similarity."""
        return "paraphrase" if self.kind == "cross" else "sts"


@dataclass(frozen=True)
class Source:
    """Where a foreign model comes from: the folder read, and the hub id and revision when cached."""

    folder: Path
    spec: str
    hub_id: str | None = None
    revision: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        raw = self.hub_id.replace("/", "--") if self.hub_id else self.folder.name
        return re.sub(r"[^\w.-]+", "-", raw).strip("-.") or "model"


def looks_like_hub_id(spec: str) -> bool:
    """`org/name`, not a registry spec (`name/3`, `name@alias`, `models:/...`) nor a path on disk."""
    if not HUB_ID.match(spec) or spec.rsplit("/", 1)[1].isdigit():
        return False
    return not Path(spec).expanduser().exists()


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache as the environment says now (`HF_HUB_CACHE`, else `$HF_HOME/hub`)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def cached_snapshot(hub_id: str) -> Source:
    """The snapshot folder of `hub_id` in the local cache (its `main` revision); never downloads."""
    from huggingface_hub import snapshot_download

    cache = hub_cache_dir()
    try:
        folder = Path(snapshot_download(hub_id, cache_dir=str(cache), local_files_only=True))
    except Exception as exc:  # LocalEntryNotFoundError, offline-mode errors, a broken cache entry
        raise ForeignModelError(
            f"{hub_id}: not a folder, and not in the local Hugging Face cache ({cache}); simpair never "
            "downloads: copy the model folder here, or fill the cache on a machine that can "
            f"(`hf download {hub_id}`), then pass the folder or the id"
        ) from exc
    return Source(folder=folder, spec=hub_id, hub_id=hub_id, revision=folder.name)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ForeignModelError(f"{path}: cannot be read as JSON ({exc})") from None


def _max_length(weights_dir: Path, declared: int | None) -> int:
    """sentence-transformers' `max_seq_length`, else the tokenizer's and the positions' limit; at most 512."""
    candidates = [MAX_LENGTH_CAP]
    if declared:
        candidates.append(int(declared))
    tok = weights_dir / "tokenizer_config.json"
    if declared is None and tok.is_file():
        value = _read_json(tok).get("model_max_length")
        if isinstance(value, int | float) and 0 < value < 1_000_000:
            candidates.append(int(value))
    config = weights_dir / "config.json"
    if config.is_file():
        positions = _read_json(config).get("max_position_embeddings")
        if isinstance(positions, int) and positions > 0:
            candidates.append(positions)
    return min(candidates)


def _check_weights(folder: Path, weights_dir: Path) -> None:
    if not (weights_dir / "config.json").is_file():
        raise ForeignModelError(
            f"{folder}: no config.json in {weights_dir} (not a transformers model folder)"
        )
    if not any(weights_dir.glob("*.safetensors")):
        pickled = sorted(p.name for p in weights_dir.iterdir() if p.suffix in PICKLE_SUFFIXES)
        found = f" (only {', '.join(pickled)})" if pickled else ""
        raise ForeignModelError(
            f"{folder}: no safetensors weights{found}; simpair never loads pickled weights: re-save the "
            "model with safe_serialization=True"
        )
    if not any((weights_dir / name).is_file() for name in TOKENIZER_FILES):
        raise ForeignModelError(
            f"{folder}: no tokenizer files in {weights_dir} ({', '.join(TOKENIZER_FILES)})"
        )


def _module_type(entry: dict[str, Any]) -> str:
    return str(entry.get("type", "")).rsplit(".", 1)[-1]


def pooling_modes(config: dict[str, Any]) -> list[str]:
    """The pooling modes a `Pooling` config switches on, in either format sentence-transformers wrote:
    `pooling_mode: "mean"` (or a list; 6.x) or `pooling_mode_mean_tokens: true` flags (2.x-5.x)."""
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        return [mode]
    if isinstance(mode, list):
        return sorted(str(m) for m in mode)
    flags = [
        k.removeprefix("pooling_mode_") for k, v in config.items() if k.startswith("pooling_mode_") and v
    ]
    names = {"mean_tokens": "mean", "cls_token": "cls", "max_tokens": "max"}
    return sorted(names.get(flag, flag) for flag in flags)


def _sentence_transformers(folder: Path) -> Detected:
    """Transformer -> Pooling (mean or cls) [-> Normalize], or a refusal naming what is not."""
    modules = _read_json(folder / "modules.json")
    if not isinstance(modules, list) or not modules:
        raise ForeignModelError(f"{folder / 'modules.json'}: expected a list of modules")
    types = [_module_type(m) for m in modules]
    others = [
        f"{t} ({m.get('path') or '.'})" for t, m in zip(types, modules, strict=True) if t not in ST_SUPPORTED
    ]
    if others:
        raise ForeignModelError(
            f"{folder}: sentence-transformers module(s) {', '.join(others)} not supported; simpair runs "
            "Transformer -> Pooling (mean or cls) -> optional Normalize"
        )
    if types[:2] != ["Transformer", "Pooling"] or any(t != "Normalize" for t in types[2:]):
        raise ForeignModelError(
            f"{folder}: module order {' -> '.join(types)} not supported; simpair runs "
            "Transformer -> Pooling -> optional Normalize"
        )
    weights_dir = folder / str(modules[0].get("path") or "")
    pooling_file = folder / str(modules[1].get("path") or "") / "config.json"
    pooling_cfg = _read_json(pooling_file) if pooling_file.is_file() else {}
    modes = pooling_modes(pooling_cfg)
    if modes not in (["mean"], ["cls"]):
        raise ForeignModelError(
            f"{folder}: pooling {' + '.join(modes) or 'none'} ({pooling_file.relative_to(folder)}) not "
            "supported; simpair pools mean or cls"
        )
    bert_cfg_file = weights_dir / "sentence_bert_config.json"
    bert_cfg = _read_json(bert_cfg_file) if bert_cfg_file.is_file() else {}
    task = bert_cfg.get("transformer_task", "feature-extraction")
    if task != "feature-extraction":
        raise ForeignModelError(
            f"{folder}: transformer_task {task!r} not supported; simpair pools the encoder's token vectors"
        )
    if bert_cfg.get("do_lower_case"):
        raise ForeignModelError(
            f"{folder}: do_lower_case in sentence_bert_config.json not supported (simpair feeds texts to the "
            "tokenizer as they are)"
        )
    st_cfg_file = folder / "config_sentence_transformers.json"
    st_cfg = _read_json(st_cfg_file) if st_cfg_file.is_file() else {}
    if st_cfg.get("default_prompt_name"):
        raise ForeignModelError(
            f"{folder}: default prompt {st_cfg['default_prompt_name']!r} not supported (simpair adds no "
            "prompt, so embeddings would differ from the model's own)"
        )
    normalize = "Normalize" in types
    similarity = st_cfg.get("similarity_fn_name") or "cosine"
    if similarity not in ("cosine", "dot") or (similarity == "dot" and not normalize):
        raise ForeignModelError(
            f"{folder}: similarity {similarity!r} not supported; simpair compares embeddings by cosine"
        )
    _check_weights(folder, weights_dir)
    return Detected(
        shape="sentence-transformers",
        kind="bi",
        weights_dir=weights_dir,
        pooling=modes[0],
        max_length=_max_length(weights_dir, bert_cfg.get("max_seq_length")),
        normalize=normalize,
    )


def _is_classifier(config: dict[str, Any]) -> bool:
    return any(str(a).endswith("ForSequenceClassification") for a in config.get("architectures") or [])


def _classifier(
    folder: Path, weights_dir: Path, config: dict[str, Any], declared_length: int | None = None
) -> Detected:
    """A sequence classifier read as a cross-encoder: one logit -> sigmoid, two -> softmax of class 1."""
    from simpair.models.cross_encoder import checkpoint_labels

    try:
        labels = checkpoint_labels(weights_dir)
    except ValueError as exc:
        raise ForeignModelError(str(exc)) from None
    if labels == 2 and config.get("problem_type") == "multi_label_classification":
        raise ForeignModelError(
            f"{folder}: a multi-label classifier (two independent sigmoids) not supported; simpair reads "
            "two labels as softmax classes"
        )
    return Detected(
        "classifier",
        "cross",
        weights_dir,
        labels=labels,
        max_length=_max_length(weights_dir, declared_length),
    )


# The activations sentence-transformers' CrossEncoder may apply that give simpair's reading of the
# logits (one -> sigmoid, two -> softmax of class 1) or a monotone function of it (Identity).
CROSS_ACTIVATIONS = {1: ("Sigmoid", "Identity"), 2: ("Softmax", "Identity")}


def _st_cross_encoder(folder: Path) -> Detected | None:
    """A CrossEncoder saved by sentence-transformers 6.x (one `Transformer` module whose task is
    sequence-classification), read as the classifier it wraps; `None` for any other modules.json."""
    modules = _read_json(folder / "modules.json")
    if not isinstance(modules, list) or len(modules) != 1 or _module_type(modules[0]) != "Transformer":
        return None
    weights_dir = folder / str(modules[0].get("path") or "")
    bert_cfg_file = weights_dir / "sentence_bert_config.json"
    bert_cfg = _read_json(bert_cfg_file) if bert_cfg_file.is_file() else {}
    config_file = weights_dir / "config.json"
    config = _read_json(config_file) if config_file.is_file() else {}
    if bert_cfg.get("transformer_task") != "sequence-classification" or not _is_classifier(config):
        return None
    _check_weights(folder, weights_dir)
    if bert_cfg.get("do_lower_case"):
        raise ForeignModelError(
            f"{folder}: do_lower_case in sentence_bert_config.json not supported (simpair feeds texts to the "
            "tokenizer as they are)"
        )
    detected = _classifier(folder, weights_dir, config, bert_cfg.get("max_seq_length"))
    st_cfg_file = folder / "config_sentence_transformers.json"
    st_cfg = _read_json(st_cfg_file) if st_cfg_file.is_file() else {}
    activation = str(st_cfg.get("activation_fn") or "").rsplit(".", 1)[-1]
    allowed = CROSS_ACTIVATIONS.get(detected.labels, ())
    if activation and activation not in allowed:
        raise ForeignModelError(
            f"{folder}: cross-encoder activation {activation} with {detected.labels} label(s) not supported; "
            f"simpair reads {'one logit as sigmoid' if detected.labels == 1 else 'two as softmax of class 1'}"
        )
    return replace(detected, shape="cross-encoder")


def detect(folder: Path) -> Detected:
    """Which of the three shapes `folder` is (see the module docstring), or `ForeignModelError`."""
    folder = Path(folder)
    if (folder / "modules.json").is_file():
        if (cross := _st_cross_encoder(folder)) is not None:
            return cross
        return _sentence_transformers(folder)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ForeignModelError(
            f"{folder}: a folder, but not a saved model: no {METADATA_FILE} (simpair), modules.json "
            "(sentence-transformers) or config.json (transformers)"
        )
    config = _read_json(config_file)
    _check_weights(folder, folder)
    if _is_classifier(config):
        return _classifier(folder, folder, config)
    note = (
        "no sentence-transformers files and no classifier head: read as a bi-encoder with mean pooling "
        "and cosine, as the gate reads an untrained backbone"
    )
    return Detected("encoder", "bi", folder, max_length=_max_length(folder, None), note=note)


def _adopted_files(weights_dir: Path) -> list[Path]:
    """The files of the weights folder a simpair model folder takes (top level only, never pickles)."""
    return sorted(
        p for p in weights_dir.iterdir()
        if p.is_file() and p.suffix not in PICKLE_SUFFIXES and p.name not in SKIPPED_NAMES
        and not p.name.startswith(".") and not p.name.lower().startswith("readme")
    )  # fmt: skip


def _cache_key(source: Source, detected: Detected, task: str, files: list[Path]) -> str:
    """Names, sizes and modification times of the files (and small JSON contents), task and detection."""
    digest = hashlib.sha256(f"{ADOPTION_FORMAT}\0{task}\0{detected!r}".encode())
    for path in files:
        stat = path.stat()  # follows the cache's symlinks to their blobs
        digest.update(f"\0{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
        if path.suffix == ".json" and stat.st_size < 1_000_000:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def content_sha256(files: list[Path]) -> str:
    """sha256 over every adopted file's name and bytes: what the model is, wherever it sits."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def link_or_copy(source: Path, target: Path, *, hardlink: bool = True) -> str:
    """Hard link to the real file (a symlink's target, never the link), else a copy; returns which.

    For folders handed to MLflow: its artifact logging refuses a symlink that resolves outside the
    folder, so a file that cannot be hard-linked (another filesystem) is copied.
    """
    real = Path(source).resolve()
    if hardlink:
        try:
            os.link(real, target)
            return "hardlink"
        except OSError:
            pass
    shutil.copy2(real, target)
    return "copy"


def link_file(source: Path, target: Path) -> str:
    """Hard link (no bytes copied), else a symlink, else a copy; returns which."""
    real = source.resolve()
    try:
        os.link(real, target)
        return "hardlink"
    except OSError:
        pass
    try:
        target.symlink_to(real)
        return "symlink"
    except OSError:
        shutil.copy2(real, target)
        return "copy"


def resolve_source(spec: str | Path) -> Source:
    """A folder on disk, else a hub id found in the local cache (`ForeignModelError` otherwise)."""
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return Source(folder=folder.resolve(), spec=str(folder.resolve()))
    if looks_like_hub_id(str(spec)):
        return cached_snapshot(str(spec))
    raise ForeignModelError(f"{spec}: no such folder, and not a hub id (org/name)")


def adopt(spec: str | Path, home: Path, task: str | None = None) -> Path:
    """The simpair model folder for a foreign model (made once, then found by its key)."""
    source = resolve_source(spec)
    detected = detect(source.folder)
    task = task or detected.default_task
    if task not in ("paraphrase", "sts"):
        raise ForeignModelError(f"task must be paraphrase or sts, got {task!r}")
    files = _adopted_files(detected.weights_dir)
    target = Path(home) / IMPORTED_DIR / f"{source.name}-{_cache_key(source, detected, task, files)}"
    if (target / METADATA_FILE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(target)
    tmp.mkdir()
    try:
        methods = {link_file(path, tmp / path.name) for path in files}
        metadata = _metadata(source, detected, task, files, methods)
        if detected.kind == "bi":
            from transformers import AutoConfig

            from simpair.models.st_export import write_sentence_transformers_files

            # through AutoConfig: DistilBERT and others name the width differently (`dim`) in config.json
            hidden = int(AutoConfig.from_pretrained(tmp).hidden_size)
            write_sentence_transformers_files(tmp, hidden, detected.max_length, pooling=detected.pooling)
        from simpair.models.tokenizer import load_tokenizer, tokenizer_fingerprint

        metadata.tokenizer_fingerprint = tokenizer_fingerprint(load_tokenizer(tmp))
        metadata.write(tmp)
        if not _rename_if_absent(tmp, target):
            log.info("%s was adopted by another process meanwhile: using its folder", source.spec)
            return target
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("adopted %s (%s, %s) as %s", source.spec, detected.shape, detected.kind, target)
    return target


def _rename_if_absent(tmp: Path, target: Path) -> bool:
    """Move the finished `tmp` in as `target` unless another process already did; True when ours won.

    Never swaps out a complete folder: a process adopting the same model at the same time may be
    reading it, and every process must end with the same folder (and so the same local version,
    which hashes `imported_at`). A target left without `simpair.json` (a crash) is replaced.
    """
    try:
        os.rename(tmp, target)  # fails on a non-empty existing folder (ENOTEMPTY / EEXIST)
        return True
    except OSError:
        if (target / METADATA_FILE).is_file():
            return False
    commit(tmp, target)
    return True


def _metadata(
    source: Source, detected: Detected, task: str, files: list[Path], methods: set[str]
) -> ModelMetadata:
    """simpair.json of an adopted folder: what was detected, no chosen threshold, where it came from."""
    backbone = (
        source.hub_id
        if source.hub_id and detected.weights_dir == source.folder
        else str(detected.weights_dir)
    )
    provenance = {
        "origin": "imported",
        "source": source.spec,
        "hub_id": source.hub_id,
        "revision": source.revision,
        "shape": detected.shape,
        "content_sha256": content_sha256(files),
        "imported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "labels": detected.labels,
        "linked": "+".join(sorted(methods)),
        **({"note": detected.note} if detected.note else {}),
    }
    return ModelMetadata(
        kind=detected.kind,  # type: ignore[arg-type]
        task=task,  # type: ignore[arg-type]
        objective="imported",
        threshold=0.5,
        threshold_chosen=False,
        max_length=detected.max_length,
        backbone=backbone,
        pooling=detected.pooling,  # type: ignore[arg-type]
        imported=provenance,
        created_at=provenance["imported_at"],
    )


def describe(detected: Detected) -> dict[str, Any]:
    """The detection as plain values (for reports)."""
    out = asdict(detected)
    out["weights_dir"] = str(detected.weights_dir)
    return out
