"""Starting the CLI stays light: `simpair ingest` must not pay for torch and transformers.

Importing them cost about 7 s of CPU and 350 MB here, a third of a 2M-row ingest, although only
the commands that load a model need them; they load on first use instead (`simpair.models`).
Help texts load no ML or data library at all: the defaults they show come from `simpair.defaults`,
so `simpair --help` takes 0.3 s of CPU instead of 1.0 s (2026-11-26, 2 cores).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "mlflow", "prefect")
# what a help text must never pay for (pydantic is not here: typer itself loads it to parse options)
NOT_FOR_HELP = (
    *HEAVY,
    *("sklearn", "matplotlib", "numpy", "scipy", "pandas", "polars", "pyarrow", "fsspec", "onnxruntime"),
)


def test_cli_starts_without_torch_transformers_mlflow_or_prefect() -> None:
    code = (
        f"import sys; from simpair.cli import app; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"importing the CLI loaded: {done.stdout.strip()}"


def test_scoring_run_imports_no_statistics_or_tracking_library() -> None:
    # the monitoring step's drift tests and the reference lookup load when a run ends, not before the
    # first pair: importing scipy.stats, scikit-learn and MLflow here cost about a second per `simpair score`
    code = (
        "import sys, simpair.scoring.run; "
        "print(','.join(m for m in ('scipy', 'sklearn', 'mlflow', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"importing the scoring run loaded: {done.stdout.strip()}"


def test_models_names_load_on_first_use() -> None:
    import simpair.models as models
    from simpair.models.metadata import METADATA_FILE

    assert sorted(models.__all__) == sorted(models._EXPORTS)
    assert models.METADATA_FILE == METADATA_FILE


def _loaded_after(code: str) -> dict:
    """Run `code` in a fresh interpreter: the JSON object it fills, with the heavy modules it loaded."""
    probe = (
        f"import json, sys\n{code}\n"
        f"result['loaded'] = sorted(m for m in {NOT_FOR_HELP!r} if m in sys.modules)\n"
        "print(json.dumps(result))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["ingest", "--help"]])
def test_help_loads_no_ml_or_data_library(args: list[str]) -> None:
    code = f"""
sys.argv = ['simpair', *{args!r}]
from simpair.cli import app
try:
    app()
except SystemExit as exc:
    result = {{'code': exc.code}}
"""
    result = _loaded_after(code)
    assert result["code"] in (0, None)
    assert result["loaded"] == [], f"simpair {' '.join(args)} loaded {result['loaded']}"


def test_every_commands_help_loads_no_ml_or_data_library() -> None:
    code = """
import typer.main
from typer.testing import CliRunner
from simpair.cli import app

def paths(command, prefix):
    yield prefix
    for name, sub in sorted(getattr(command, 'commands', {}).items()):
        yield from paths(sub, [*prefix, name])

runner = CliRunner()
result = {'codes': {' '.join(p): runner.invoke(app, [*p, '--help']).exit_code
                    for p in paths(typer.main.get_command(app), [])}}
"""
    result = _loaded_after(code)
    assert len(result["codes"]) > 15 and set(result["codes"].values()) == {0}, result["codes"]
    assert result["loaded"] == [], f"the help texts loaded {result['loaded']}"


def test_local_ingest_loads_no_object_store_library(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """fsspec (and its drivers) load only for a remote `--sources`: a local ingest starts without them."""
    from ingest_helpers import TOY_CONTRACT

    sources, contracts = tmp_path / "sources", tmp_path / "contracts"
    (sources / "toy").mkdir(parents=True)
    contracts.mkdir()
    for split in ("train", "test"):
        rows = "".join(f"{i % 2}\t{split} sentence {i}\tother {split} sentence {i}\n" for i in range(4))
        (sources / "toy" / f"{split}.tsv").write_text("label\ta\tb\n" + rows)
    (contracts / "toy.yaml").write_text(TOY_CONTRACT)
    code = f"""
from simpair.ingest import run_ingest
report = run_ingest({str(sources)!r}, {str(tmp_path / "home")!r}, {str(contracts)!r})
result = {{'status': [d.status for d in report.datasets], 'fsspec': 'fsspec' in sys.modules}}
"""
    result = _loaded_after(code)
    assert result["status"] == ["ingested"] and result["fsspec"] is False, result


@pytest.mark.parametrize(("kind", "precision"), [("cross", "int8"), ("bi", "fp32")])
def test_a_cached_graph_scores_without_building_the_torch_model(tmp_path, kind: str, precision: str) -> None:  # type: ignore[no-untyped-def]
    """The second process to score a model version reads its graph from the cache: it neither builds
    the torch model nor imports the modeling code (about 2 s of a fresh `simpair score` on 2 cores)."""
    from simpair.models import save_tiny_model

    model = save_tiny_model(tmp_path / "model", task="paraphrase" if kind == "cross" else "sts", kind=kind)
    code = f"""
import os
os.environ['SIMPAIR_GRAPH_CACHE'] = {str(tmp_path / "graphs")!r}
from simpair.runtime.loader import load_predictor
p = load_predictor({str(model)!r}, precision={precision!r}, backend='onnx')
scores = p.predict(['a cat sat', 'stocks fell'], ['the cat sat down', 'it rained'])['score']
result = {{'scores': [float(s) for s in scores],
          'modeling': sorted(m for m in ('simpair.models.bi_encoder', 'simpair.models.cross_encoder')
                             if m in sys.modules)}}
"""
    first, second = _loaded_after(code), _loaded_after(code)
    assert first["modeling"], "the first process exports the graph: it must build the torch model"
    assert second["modeling"] == [], second
    assert second["scores"] == pytest.approx(first["scores"], abs=1e-6)
