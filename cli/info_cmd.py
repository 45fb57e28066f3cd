"""CLI command `simpair info`: where this simpair reads and writes, on what device, with which backends.

The first thing to paste into a bug report, and the quickest check of a new install. It only looks:
no folder, database or cache is created, no model is loaded, and the heavy libraries are never
imported (backends are found through their installed metadata; torch is imported only when its build
could see a GPU).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform
import runpy
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from simpair import settings
from simpair.cli.common import HomeOption, SourcesOption, json_target
from simpair.settings import SOURCES_HINT

# Optional backends a command may use when installed: shown name -> (import name, distribution names).
BACKENDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "onnxruntime": ("onnxruntime", ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino")),
    "openvino": ("openvino", ("openvino",)),
    "faiss": ("faiss", ("faiss-cpu", "faiss-gpu", "faiss-gpu-cu12", "faiss")),
    "s3fs": ("s3fs", ("s3fs",)),
    "sentence-transformers": ("sentence_transformers", ("sentence-transformers",)),
    "prefect-dask": ("prefect_dask", ("prefect-dask",)),
}


def simpair_version() -> str:
    """The installed distribution's version (what `simpair --version` prints)."""
    try:
        return importlib.metadata.version("simpair")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: run from a source tree without `pip install`)"


def backend_versions() -> dict[str, str | None]:
    """Each optional backend's installed version, None when it cannot be imported here."""
    found: dict[str, str | None] = {}
    for name, (module, dists) in BACKENDS.items():
        version = None
        if importlib.util.find_spec(module) is not None:
            for dist in dists:
                try:
                    version = importlib.metadata.version(dist)
                    break
                except importlib.metadata.PackageNotFoundError:
                    continue
            version = version or "installed"
        found[name] = version
    return found


def _torch_build() -> dict[str, Any] | None:
    """torch's version and GPU build (CUDA/ROCm) read from torch/version.py, without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        values = runpy.run_path(str(version_file))
    except (OSError, SyntaxError):
        return {"version": "unknown", "cuda": None, "hip": None}
    return {"version": values.get("__version__"), "cuda": values.get("cuda"), "hip": values.get("hip")}


def device_info() -> dict[str, Any]:
    """The device `auto` picks: a GPU when torch sees one, else the CPU and the threads simpair uses."""
    from simpair.runtime.loader import default_threads

    build = _torch_build()
    info: dict[str, Any] = {"torch": build["version"] if build else None}
    if build and (build["cuda"] or build["hip"]):
        import torch  # a GPU build: only torch itself can say whether a GPU is usable

        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            return {**info, "kind": "cuda", "name": torch.cuda.get_device_name(0), "count": count}
    return {**info, "kind": "cpu", "threads": default_threads()}


def collect(home: Path | None = None, sources: str | None = None) -> dict[str, Any]:
    """Everything `simpair info` reports, as plain JSON-ready values; creates nothing."""
    home_path = settings.home_dir(home, create=False)
    try:
        sources_value: str | None = str(settings.sources_dir(sources))
    except settings.NoSources:
        sources_value = None
    return {
        "version": simpair_version(),
        "python": f"{platform.python_version()} ({sys.executable})",
        "package": str(settings.PACKAGE_DIR),
        "checkout": str(settings.CHECKOUT) if settings.CHECKOUT else None,
        "home": str(home_path),
        "home_exists": home_path.is_dir(),
        "sources": sources_value,
        "contracts": str(settings.contracts_dir()),
        "configs": str(settings.configs_dir()),
        "tracking_uri": settings.tracking_uri(home, create=False),
        "device": device_info(),
        "backends": backend_versions(),
    }


def render(facts: dict[str, Any]) -> list[str]:
    """`key: value` lines, one fact each, never wrapped (paths stay whole when piped)."""
    device = facts["device"]
    if device["kind"] == "cuda":
        device_line = f"cuda: {device['name']} ({device['count']} visible), torch {device['torch']}"
    else:
        device_line = f"cpu, {device['threads']} threads, torch {device['torch'] or 'not installed'}"
    checkout = facts["checkout"] or "no (installed package)"
    home = facts["home"] + ("" if facts["home_exists"] else " (created on first use)")
    rows = [
        ("simpair", facts["version"]),
        ("python", facts["python"]),
        ("package", facts["package"]),
        ("checkout", checkout),
        ("home", home),
        ("sources", facts["sources"] or f"none: {SOURCES_HINT}"),
        ("contracts", facts["contracts"]),
        ("configs", facts["configs"]),
        ("tracking", facts["tracking_uri"]),
        ("device", device_line),
        ("backends", ""),
    ]
    rows += [(f"  {name}", version or "not installed") for name, version in facts["backends"].items()]
    width = max(len(key) for key, _ in rows)
    return [f"{key + ':':<{width + 1}} {value}".rstrip() for key, value in rows]


def info(
    home: HomeOption = None,
    sources: SourcesOption = None,
    json_out: Annotated[
        str | None,
        typer.Option(
            "--json",
            metavar="PATH",
            callback=json_target,
            help="Also write the facts as JSON to PATH; `--json -` prints only the JSON, on stdout.",
        ),
    ] = None,
) -> None:
    """Version, home, sources, contracts, tracking URI, checkout or installed, device, optional backends.

    Only reads: no home folder, MLflow database or cache is created.
    """
    facts = collect(home, sources)
    text = json.dumps(facts, indent=2) + "\n"
    if json_out == "-":
        sys.stdout.write(text)
        return
    for line in render(facts):
        typer.echo(line)
    if json_out is not None:
        Path(json_out).write_text(text)


def register(app: typer.Typer) -> None:
    """Add `simpair info` to the top-level app."""
    app.command("info")(info)
