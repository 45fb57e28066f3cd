"""Compiled graphs kept across processes, so a fresh `simpair score` does not export and compile again.

Exporting a model to ONNX, verifying it against torch, quantizing it to int8, ONNX Runtime's graph
optimizations and OpenVINO's compilation cost seconds on every load, paid before the first pair is
scored. Each of them is a pure function of the model's weights, the export code and the runtimes'
versions, so their results are kept in one folder per model (`entry`):

- `fp32.onnx`: the verified fp32 export (`onnx_backend.export_verified`), with `fp32.json` naming its
  variant ([CLS]-only last layer or plain);
- `int8-<mode>.onnx`: its int8 version (`int8_backend`);
- `ort-<name>.onnx`: ONNX Runtime's optimized form of a graph (`SessionOptions.optimized_model_filepath`),
  loaded again with the optimizer off;
- `openvino/`: OpenVINO's own model cache (`CACHE_DIR`) for the compiled bf16 / f32 graphs.

The folder's name holds a digest of everything the files depend on: the weights' bytes (`weights_digest`),
the model kind, the versions of torch, transformers, onnx, onnxruntime and openvino, the source of the
export and quantization code, and the CPU's flags (optimized graphs may use the host's kernels). A
changed model, a new runtime or an edited exporter therefore gets a new folder; old ones are just
left behind (delete the folder to reclaim the space).

Where: `$SIMPAIR_GRAPH_CACHE` when set (`off` turns the cache off); else `<home>/graph-cache` for a
model downloaded into a pipeline home's registry cache, or under the home a command was given with
`--home` (`follow_home`), or under `$SIMPAIR_HOME` when that is set; else `.graph-cache/` beside the
model's folder (for a stack's or cascade's member, beside the whole model: never inside it, where
files would change its weights digest). Every file is written under a temporary name and renamed
in (`simpair.atomic`), with a manifest (sizes and SHA-256) written last, so two processes never
read half a file; an entry whose files are missing, cut short or altered is rebuilt, and a cache
that cannot be written is skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from simpair.atomic import atomic_path, atomic_write_text
from simpair.models.cpu_flags import cpu_flag_set

ENV = "SIMPAIR_GRAPH_CACHE"
# the home a command was given with `--home` (`follow_home`): an environment variable, so the worker
# processes a run starts (Dask, Prefect) put their graphs where the command's own process does
HOME_ENV = "SIMPAIR_GRAPH_CACHE_HOME"
FOLDER = "graph-cache"
MANIFEST = "manifest.json"
# the modules whose code shapes a cached graph: editing any of them starts new entries
_CODE = ("onnx_backend.py", "int8_backend.py", "graph_cache.py", "../models/int8_check.py")
_RUNTIMES = ("torch", "transformers", "onnx", "onnxruntime", "openvino")
log = logging.getLogger(__name__)


def cache_root(model_dir: str | Path) -> Path | None:
    """The graph cache folder for a model (see the module's docstring), or None when it is off."""
    explicit = os.environ.get(ENV)
    if explicit:
        return None if explicit.strip().lower() in ("off", "0", "false", "no") else Path(explicit)
    model_dir = Path(model_dir).resolve()
    for parent in model_dir.parents:
        if parent.name == "registry-cache":  # `<home>/registry-cache/<store>/<name>/<version>`
            return parent.parent / FOLDER
    home = os.environ.get(HOME_ENV) or os.environ.get("SIMPAIR_HOME")
    if home:
        return Path(home).expanduser() / FOLDER
    return outermost_model(model_dir).parent / ".graph-cache"


def outermost_model(model_dir: Path) -> Path:
    """The folder of the model `model_dir` belongs to: itself, or for a member of a stack or cascade
    (`<composite>/members/<member>`) the composite's, so a member's graphs are kept beside the whole
    model and never inside it."""
    while model_dir.parent.name == "members" and (model_dir.parent.parent / "simpair.json").is_file():
        model_dir = model_dir.parent.parent
    return model_dir


@contextmanager
def follow_home(home: str | Path | None) -> Iterator[None]:
    """Within the block, keep graphs under `<home>/graph-cache`, in this process and those it starts.

    A command given `--home` for a model passed as a local folder would otherwise put its graphs
    beside that folder (or under `$SIMPAIR_HOME`), away from the home it was told to use. `None`
    (no `--home`) leaves the default as it is. The setting is undone on leaving, so a command run
    in-process (a test, a notebook) leaves the next one's cache where it was.
    """
    if home is None:
        yield
        return
    before = os.environ.get(HOME_ENV)
    os.environ[HOME_ENV] = str(Path(home).expanduser().resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(HOME_ENV, None)
        else:
            os.environ[HOME_ENV] = before


def runtime_digest() -> str:
    """16 hex digits of everything besides the weights that a compiled graph's outputs depend on (the
    runtimes' versions, the export and quantization code, the CPU's flags): the embedding store keys
    its vectors by it too, so a store kept across nights is not read through an upgraded runtime."""
    return hashlib.sha256(f"{_environment()}|{_live_code()}".encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def _environment() -> str:
    """Runtime versions, the export code's source digest and the CPU's flags, as one string."""
    versions = []
    for name in _RUNTIMES:
        try:
            versions.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name}=-")
    code = hashlib.sha256()
    here = Path(__file__).parent
    for name in _CODE:
        code.update((here / name).read_bytes())
    have = cpu_flag_set()
    if have is not None:
        flags = " ".join(sorted(have))
    else:
        import platform

        flags = platform.processor() or platform.machine()
    return "|".join([*versions, code.hexdigest(), hashlib.sha256(flags.encode()).hexdigest()])


# the functions that build a graph, as this process runs them (the source digest covers the files)
_BUILDERS = {
    "simpair.runtime.onnx_backend": ("export_encoder", "export_verified", "cls_last_layer_model", "_probe"),
    "simpair.runtime.int8_backend": ("quantize_graph", "quantize_per_row"),
}


def _code_bytes(code: Any) -> bytes:
    """A code object's instructions, names and constants (nested functions too), as stable bytes
    (`marshal` output depends on reference counts, so it differs between two calls)."""
    parts = [code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()]
    for const in code.co_consts:
        parts.append(_code_bytes(const) if hasattr(const, "co_code") else repr(const).encode())
    return b"\0".join(parts)


def _live_code() -> str:
    """A digest of the graph builders this process would call: a builder replaced at run time (a
    patched exporter, a test's stand-in) builds other graphs, so it must not share their entries."""
    import importlib

    digest = hashlib.sha256()
    for module_name, names in _BUILDERS.items():
        module = importlib.import_module(module_name)
        for name in names:
            obj = getattr(module, name, None)
            code = getattr(obj, "__code__", None)
            digest.update(_code_bytes(code) if code is not None else repr(obj).encode())
    return digest.hexdigest()


def entry(model_dir: str | Path, kind: str) -> Path | None:
    """The cache folder for one model (a single model: a composite's members have their own), or None
    when the cache is off. Nothing is created here."""
    from simpair.runtime.weights_digest import weights_digest

    root = cache_root(model_dir)
    if root is None:
        return None
    key = "|".join((weights_digest(model_dir, root), kind, _environment(), _live_code()))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(model_dir).name)[:40]
    return root / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def _checksum(path: Path) -> str:
    """CRC-32 of a file: catches a file cut short or damaged on disk at the speed of reading it (a
    cryptographic digest took twice as long on a 90 MB graph, and nobody forges these files)."""
    crc = 0
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def _manifest_path(folder: Path, name: str) -> Path:
    return folder / f"{name}.{MANIFEST}"


def read(folder: Path | None, name: str) -> tuple[Path, dict[str, Any]] | None:
    """The cached file `name` and the facts stored with it, if it is there whole; else None.

    "Whole" means its manifest exists and its size and CRC-32 match the manifest's: a file cut short,
    overwritten or missing is reported (once, at debug level) and treated as absent, so it is rebuilt.
    """
    if folder is None:
        return None
    path, manifest = folder / name, _manifest_path(folder, name)
    try:
        facts = json.loads(manifest.read_text())
        if path.stat().st_size != facts["size"] or _checksum(path) != facts["crc32"]:
            raise ValueError("size or checksum differs from its manifest")
        return path, dict(facts.get("facts", {}))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("graph cache %s unreadable (%s); building it again", path, exc)
        return None


def write(folder: Path | None, name: str, source: Path, facts: dict[str, Any] | None = None) -> Path | None:
    """Copy `source` into the cache as `name` (atomically), then its manifest; the cached path, or None
    when there is no cache or it cannot be written (the caller keeps using `source`)."""
    if folder is None:
        return None
    import shutil

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / name) as tmp:
            shutil.copyfile(source, tmp)
        record = {
            "size": (folder / name).stat().st_size,
            "crc32": _checksum(folder / name),
            "facts": facts or {},
        }
        atomic_write_text(_manifest_path(folder, name), json.dumps(record, sort_keys=True))
        return folder / name
    except OSError as exc:
        log.warning("graph cache %s not written (%s); graphs are built on every load", folder, exc)
        return None


def seal(folder: Path | None, name: str, facts: dict[str, Any] | None = None) -> None:
    """Write the manifest of a file a runtime already wrote into `folder` itself (under a temporary
    name and renamed in by the caller): its size and checksum from now on prove it whole."""
    if folder is None or not (folder / name).is_file():
        return
    try:
        path = folder / name
        record = {"size": path.stat().st_size, "crc32": _checksum(path), "facts": facts or {}}
        atomic_write_text(_manifest_path(folder, name), json.dumps(record, sort_keys=True))
    except OSError as exc:
        log.warning("graph cache %s not sealed (%s)", folder / name, exc)


def openvino_dir(folder: Path | None) -> Path | None:
    """OpenVINO's `CACHE_DIR` inside an entry (OpenVINO names, writes and checks its own blobs)."""
    if folder is None:
        return None
    try:
        (folder / "openvino").mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / "openvino"
