"""The layers stay layers: the domain imports no Prefect, every import points down, no circles.

The import graph is read from the source (every `import` statement, including those inside
functions), so a lazy import that reaches up counts as much as a top-level one.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# checkout folder -> installed package name (see [tool.setuptools] in pyproject.toml)
FOLDERS = {
    "simpair": "simpair",
    "cli": "simpair.cli",
    "tasks": "simpair.tasks",
    "ops": "simpair.ops",
    "flows": "simpair.flows",
}
# lower number = lower layer; an import may only point to the same or a lower layer. Operations (the
# local stack's supervisor, the pool dispatch's polling) sit above the domain and tasks; flows and the
# command line use them.
LAYER = {"simpair": 0, "simpair.tasks": 1, "simpair.ops": 2, "simpair.flows": 3, "simpair.cli": 4}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _layer(module: str) -> int:
    for package in ("simpair.cli", "simpair.flows", "simpair.ops", "simpair.tasks"):
        if module == package or module.startswith(package + "."):
            return LAYER[package]
    return LAYER["simpair"]


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules this file imports (a `from x import y` counts x.y when y is a module)."""
    out: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    out.add(f"{target}.{alias.name}")
                elif target in known:
                    out.add(target)
    out.discard(module)
    return out


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: _imports(m, p, known) for m, p in known.items()}


def test_domain_package_never_imports_prefect() -> None:
    offenders = []
    for path in (ROOT / "simpair").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "prefect"]
    assert offenders == []


def test_every_import_points_down() -> None:
    upward = [f"{a} -> {b}" for a, targets in _graph().items() for b in targets if _layer(b) > _layer(a)]
    assert upward == [], "imports that reach a higher layer (domain < tasks < ops < flows < cli)"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk of the import graph closes, each as the chain of modules."""
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str], on_stack: set[str]) -> None:
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt in on_stack:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in done:
                visit(nxt, stack, on_stack)
        stack.pop()
        on_stack.discard(node)
        done.add(node)

    for start in sorted(graph):
        if start not in done:
            visit(start, [], set())
    return cycles


def test_import_graph_has_no_circle() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_benchmarks_share_code_through_common_without_a_circle() -> None:
    """Benchmarks run as scripts (their folder is on the import path): they import each other by file name.

    What several share lives in benchmarks/common.py; none edits `sys.path` to reach another script
    (common.py alone may add the checkout, for a tree that was never installed), and none forms a circle.
    """
    folder = ROOT / "benchmarks"
    scripts = {path.stem: path for path in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    path_calls, path_edits = ("sys.path.insert", "sys.path.append", "sys.path.extend"), []
    for name, path in scripts.items():
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in scripts)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module in scripts:
                graph[name].add(node.module)
            elif isinstance(node, ast.Attribute) and name != "common" and ast.unparse(node) in path_calls:
                path_edits.append(f"benchmarks/{name}.py:{node.lineno}")
        graph[name].discard(name)
    assert path_edits == [], "import shared helpers from benchmarks/common.py instead"
    cycles = _cycles(graph)
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_pyproject_lists_every_package() -> None:
    """setuptools is given an explicit package list (folders map onto one namespace): none forgotten."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    expected = {"simpair.configs", "simpair.data_contracts"}
    for folder, package in FOLDERS.items():
        assert tool["package-dir"][package] == folder
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            expected.add(".".join([package, *parts]))
    assert listed == expected


# simpair's packages from the bottom up, as docs/architecture.md lists them; a module may import its
# own package, the foundation, and packages on earlier lines only. (A `package.part` entry would rank
# a sub-package apart from its package; none does: each package sits on one floor.)
DOMAIN_ORDER = [
    "settings defaults schema pairs pair_files contracts catalog atomic pair_tokens progress stages locks"
    " lazy",
    "metrics",
    "losses",
    "models",
    "ingest tokens",
    "training",
    "registry",
    "runtime",
    "ensemble",
    "evaluation",
    "selection",
    "monitoring",
    "model_import",
    "review",
    "nightly",
    "scoring",
    "mining",
]


def test_domain_packages_keep_the_documented_order() -> None:
    rank = {name: i for i, line in enumerate(DOMAIN_ORDER) for name in line.split()}

    def package(module: str) -> str | None:
        """The ranked name: `evaluation.splits` when listed on its own, else the top package `evaluation`."""
        parts = module.split(".")
        if len(parts) < 2 or _layer(module) != LAYER["simpair"]:
            return None
        return ".".join(parts[1:3]) if ".".join(parts[1:3]) in rank else parts[1]

    unranked, upward = set(), []
    for a, targets in _graph().items():
        for b in targets:
            pa, pb = package(a), package(b)
            if not pa or not pb or pa == pb:
                continue
            unranked |= {p for p in (pa, pb) if p not in rank}
            if pa in rank and pb in rank and rank[pb] > rank[pa]:
                upward.append(f"{a} -> {b}")
            if pa in rank and pb in rank and rank[pb] == rank[pa] > 0:
                upward.append(f"{a} -> {b} (same level)")
    assert not unranked, f"add {sorted(unranked)} to DOMAIN_ORDER and to docs/architecture.md"
    assert upward == []


# inference backends: only `simpair.runtime` loads them (its backends export, quantize and run graphs)
BACKEND_MODULES = ("onnxruntime", "onnx", "torch.onnx")


def test_only_the_runtime_imports_an_inference_backend() -> None:
    runtime = ROOT / "simpair" / "runtime"
    offenders = []
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_relative_to(runtime):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    names = [f"{node.value.id}.{node.attr}"]  # `torch.onnx.export(...)` after `import torch`
                offenders += [
                    f"{path.relative_to(ROOT)}: {n}"
                    for n in names
                    if any(n == b or n.startswith(b + ".") for b in BACKEND_MODULES)
                ]
    assert offenders == [], "inference backends belong in simpair/runtime/"


def _decorated_by(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """`@name`, `@name(...)`, `@prefect.name` or `@prefect.name(...)` among the function's decorators."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in (name, f"prefect.{name}"):
            return True
    return False


def test_flow_modules_are_wiring_only() -> None:
    """A module under flows/ that defines a flow defines flows and nothing else: no helper, no class.

    A flow hands a domain DAG its tasks; helpers that need Prefect live in tasks/, pure logic in
    simpair/, and `flows/launch.py` (which defines no flow) starts flows from Python.
    """
    offenders = []
    for path in sorted((ROOT / "flows").rglob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        functions = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not any(_decorated_by(n, "flow") for n in functions):
            continue
        offenders += [
            f"{path.relative_to(ROOT)}:{n.lineno} {n.name}"
            for n in body
            if isinstance(n, ast.ClassDef) or (n in functions and not _decorated_by(n, "flow"))
        ]
    assert offenders == [], "move helpers to tasks/ (Prefect-aware) or simpair/ (pure logic)"


def test_every_prefect_task_is_defined_under_tasks() -> None:
    """`@task`, `@task(...)` and `task(fn)` appear only in tasks/: a reader finds every task in one layer."""
    offenders = []
    for folder in (*FOLDERS, "benchmarks"):
        if folder == "tasks":
            continue
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {"prefect.task"} | {
                alias.asname or alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "prefect"
                for alias in node.names
                if alias.name == "task"
            }
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    # a bare `@task`; `@task(...)` is a call, found below
                    found = [node.name for d in node.decorator_list if ast.unparse(d) in names]
                elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                    found = [ast.unparse(node)[:60]] if ast.unparse(node.func) in names else []
                else:
                    continue
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in found]
    assert offenders == [], "define Prefect tasks in tasks/"


def _registered_names(tree: ast.Module) -> set[str]:
    """Command names a cli module registers: `x.command("name")`, `add_typer(..., name=)`, `Typer(name=)`."""
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute | ast.Name):
            continue
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if attr == "command" and node.args and isinstance(node.args[0], ast.Constant):
            names.add(node.args[0].value)
        keywords = [k.value for k in node.keywords if k.arg == "name"]
        names |= {k.value for k in keywords if isinstance(k, ast.Constant)}
    return names


def test_cli_commands_are_module_level_functions_in_files_named_after_them() -> None:
    """`cli/<command>_cmd.py` holds `simpair <command>` (and its family) as module-level functions.

    No command is a closure inside `register()`: a reader finds `simpair score` as `def score` in
    cli/score_cmd.py, and a test can import it.
    """
    nested, misnamed = [], []
    for path in sorted((ROOT / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for outer in ast.walk(tree):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(outer):
                if inner is not outer and isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    decorators = [ast.unparse(d) for d in inner.decorator_list]
                    if any(".command" in d or ".callback" in d for d in decorators):
                        nested.append(f"{path.relative_to(ROOT)}:{inner.lineno} {inner.name}")
        if path.stem.endswith("_cmd"):
            family = path.stem.removesuffix("_cmd").replace("_", "-")
            if family not in _registered_names(tree):
                misnamed.append(f"{path.relative_to(ROOT)} registers {sorted(_registered_names(tree))}")
    assert nested == [], "define commands at module level and register them in register(app)"
    assert misnamed == [], "name each cli/*_cmd.py after a command it holds"


def test_home_option_is_declared_once() -> None:
    """`--home` is `HomeOption` from cli/common.py in every command: one spelling, one help text."""
    offenders = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        if path.name == "common.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.arg) and node.arg == "home" and node.annotation is not None:
                annotation = ast.unparse(node.annotation)
                if "typer." in annotation or annotation.startswith("Annotated"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} home: {annotation[:40]}")
            elif isinstance(node, ast.Constant) and node.value == "--home":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} '--home'")
            elif isinstance(node, ast.Assign | ast.AnnAssign) and "Annotated" in ast.unparse(node):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                offenders += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(t)}"
                    for t in targets
                    if "home" in ast.unparse(t).lower()
                ]
    assert offenders == [], "use HomeOption from cli/common.py"


def test_evaluation_lives_in_one_package_of_small_modules() -> None:
    """Every way to evaluate a model sits in simpair/evaluation/, in modules a reader takes in at once."""
    top = (ROOT / "simpair").glob("*.py")
    stray = sorted(p.name for p in top if p.stem.startswith(("evaluat", "transfer")))
    lengths = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / "simpair" / "evaluation").rglob("*.py")
    }
    assert stray == [], "evaluation modules belong in simpair/evaluation/"
    assert {name: n for name, n in lengths.items() if n > 300} == {}


# The one loader (`simpair.runtime.loader.load_predictor`) and what it builds on: the model package
# (where `Predictor.load` is defined). A composite's predictor is built from loaded members in the
# loader, and by the ensemble fitters (above the loader), which build the composite they are fitting.
LOADER_PACKAGES = ("simpair/runtime", "simpair/models")
LOADER_CALLS = ("Predictor.load", "StackedPredictor", "CascadePredictor")
COMPOSITE_BUILDERS = ("simpair/ensemble",)


def test_models_are_loaded_through_the_one_loader() -> None:
    """Outside the loader's packages no module calls `Predictor.load`, `StackedPredictor(...)` or
    `CascadePredictor(...)`: every folder or registry ref becomes a predictor in `simpair.runtime.loader`."""
    offenders = []
    for folder in (*FOLDERS, "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if any(path.is_relative_to(ROOT / package) for package in LOADER_PACKAGES):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name | ast.Attribute):
                    continue
                called = ast.unparse(node.func)
                calls = (
                    LOADER_CALLS[:1]
                    if any(path.is_relative_to(ROOT / p) for p in COMPOSITE_BUILDERS)
                    else LOADER_CALLS
                )
                if any(called == name or called.endswith("." + name) for name in calls):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {called}")
    assert offenders == [], "load models with simpair.runtime.loader.load_predictor"


def test_domain_packages_form_no_circle() -> None:
    """Folded to top-level packages (`simpair.ensemble`, `simpair.runtime`, ...), the import graph has no
    circle: a module-level check alone would miss two packages that reach into each other by different
    modules."""
    folded: dict[str, set[str]] = {}
    for a, targets in _graph().items():
        if _layer(a) != LAYER["simpair"] or a.count(".") < 1:
            continue
        pa = a.split(".")[1]
        folded.setdefault(pa, set())
        for b in targets:
            if _layer(b) == LAYER["simpair"] and b.count(".") >= 1 and b.split(".")[1] != pa:
                folded[pa].add(b.split(".")[1])
                folded.setdefault(b.split(".")[1], set())
    cycles = _cycles(folded)
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


# The metric functions of scikit-learn and scipy that simpair reports: called in `simpair.metrics` only,
# so a figure (ROC-AUC, Spearman, F1) is computed one way everywhere.
METRIC_FUNCTIONS = {
    "sklearn.metrics": {"roc_auc_score", "f1_score", "accuracy_score", "precision_score", "recall_score"},
    "scipy.stats": {"spearmanr", "pearsonr", "kendalltau"},
}


def test_metrics_are_computed_at_the_bottom_only() -> None:
    """Imported by name (`from scipy.stats import spearmanr`) or called through a module
    (`scipy.stats.spearmanr(...)`, `stats.spearmanr(...)`): outside simpair.metrics, neither; the
    benchmarks report figures too, so they count."""
    names = set().union(*METRIC_FUNCTIONS.values())
    offenders = []
    for folder in (*FOLDERS, "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.is_relative_to(ROOT / "simpair" / "metrics"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, ast.ImportFrom) and node.module in METRIC_FUNCTIONS:
                    used = {a.name for a in node.names} & METRIC_FUNCTIONS[node.module]
                    offenders += [f"{where} {node.module}.{n}" for n in used]
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in names
                ):
                    offenders.append(f"{where} {ast.unparse(node.func)}")
    assert offenders == [], "compute metrics with simpair.metrics"


def test_metrics_import_nothing_above_the_foundation() -> None:
    rank = {name: i for i, line in enumerate(DOMAIN_ORDER) for name in line.split()}
    reach = sorted(
        f"{a} -> {b}"
        for a, targets in _graph().items()
        if a.startswith("simpair.metrics")
        for b in targets
        if not b.startswith("simpair.metrics") and rank.get(b.split(".")[1], 0) > 0
    )
    assert reach == []
