"""Installed from its wheel, simpair behaves like a package: a new user's first hour, outside the checkout.

The test builds the wheel, installs it into a fresh virtual environment in a temporary folder and runs
that environment's `simpair` from a working directory outside the checkout, as a team would after
`pip install simpair-*.whl`: `--version`, `info`, a command that needs sources without any, ingest of a
small CSV of the user's own through a contract of their own, scoring a Parquet batch with a model the
user already has (a sentence-transformers folder), `simpair models import` of that folder (it becomes
the champion), and a smoke night that trains a tiny challenger and gates it against that champion.
Nothing may be written under the new environment (site-packages included)
nor under the checkout: everything goes to `$SIMPAIR_HOME` and the folders the commands are given.

The dependencies (2 GB: torch, Prefect, MLflow ...) are not installed again: a `.pth` file in the new
environment names this test environment's site-packages. A path line in a `.pth` file adds the folder
only; the `.pth` files inside it are not run, so the editable install of the checkout stays invisible
and `import simpair` can only find the wheel's copy (the test checks that).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
# What the wheel is built from (setuptools writes build/ and *.egg-info into its source tree, so the
# build runs on a copy and the checkout stays untouched): the project files and every folder
# pyproject.toml maps into the one `simpair` namespace, read from it so a new layer folder travels too.
WHEEL_SOURCES = (
    "pyproject.toml",
    "README.md",
    *sorted(
        set(
            tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
        )
    ),
)

CONTRACT = """\
dataset: teampairs
contract_version: "1.0.0"
description: A team's own paraphrase pairs, as a CSV with a header.
format:
  delimiter: ","
  quoting: csv
  header: true
  encoding: utf-8
  field_counts: [4]
files:
  - {split: train, role: train, pattern: "teampairs/train.csv"}
  - {split: test, role: test, pattern: "teampairs/test.csv"}
columns:
  pair_id: id
  text_a: question1
  text_b: question2
  label: is_duplicate
label:
  kind: binary
  values: [0, 1]
"""

TRAIN_CONFIG = """\
name: team-smoke
task: paraphrase
kind: cross
objective: bce
backbone: tiny
train:
  - {dataset: teampairs, split: train}
dev: {split: null, carve_fraction: 0.25, carve_seed: 13}
evaluate_on:
  - {dataset: teampairs, split: test}
max_length: 32
epochs: 1
batch_size: 8
learning_rate: 1.0e-3
max_steps: 3
early_stopping_patience: null
seed: 42
"""

NIGHT_PROFILE = """\
name: team-night
lock_wait_seconds: 0
retries: {{attempts: 1, delays_seconds: [1]}}
tasks:
  paraphrase:
    config: {config}
    evaluate: [[teampairs, test]]
    gate: {{primary: f1, margin: 0.0, guardrails: {{}}}}
"""

TOPICS = [
    "the weather in Paris",
    "learning to play the guitar",
    "saving money for a house",
    "training a puppy to sit",
    "cooking rice without a cooker",
    "fixing a flat bicycle tyre",
    "growing tomatoes on a balcony",
    "writing a good cover letter",
]


def _pairs(count: int, offset: int) -> list[tuple[str, str, str, int]]:
    """`count` distinct (id, question1, question2, is_duplicate) rows: paraphrases and unrelated pairs."""
    rows = []
    for i in range(offset, offset + count):
        topic, other = TOPICS[i % len(TOPICS)], TOPICS[(i + 3) % len(TOPICS)]
        first = f"How do I get better at {topic} (question {i})?"
        if i % 2 == 0:
            rows.append((f"q{i}", first, f"What is the best way to improve at {topic}, case {i}?", 1))
        else:
            rows.append((f"q{i}", first, f"Why do people care about {other}, case {i}?", 0))
    return rows


def _write_csv(path: Path, rows: list[tuple[str, str, str, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["id,question1,question2,is_duplicate"]
    lines += [f'{pid},"{a}","{b}",{label}' for pid, a, b, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time."""
    found = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            stat = path.lstat()
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


def _git_status() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    wheels = tmp / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, src],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("simpair-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> tuple[Path, Path]:
    """(venv, its site-packages): a new environment holding only the wheel, this one's packages beside it."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, capture_output=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "test-environment-packages.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    # pip comes from the test environment through the .pth; --ignore-installed: the checkout's editable
    # simpair is visible to pip's metadata scan, and must be neither uninstalled nor taken as satisfying.
    # pip byte-compiles the wheel's modules, as a user's install does: the commands later read that
    # bytecode and write none under the environment.
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", wheel],
        check=True,
        capture_output=True,
        env={**_base_env(tmp), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    return venv, site


def _base_env(tmp: Path) -> dict[str, str]:
    """A clean environment: no SIMPAIR_*, MLFLOW_* or PREFECT_* of the test run, a home of its own.
    Python may keep bytecode (no PYTHONDONTWRITEBYTECODE), as on a user's machine: the dependencies'
    goes beside them in the test environment, never under the new one (the wheel's own modules are
    compiled by pip at install), and no command here compiles what an earlier one compiled already."""
    user = tmp / "user"
    user.mkdir(exist_ok=True)
    return {
        "PATH": f"{tmp / 'venv' / 'bin'}:/usr/bin:/bin",
        "HOME": str(user),
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }


Run = Callable[..., "subprocess.CompletedProcess[str]"]


def _sentence_transformers_folder(root: Path) -> Path:
    """A model as a team brings it, saved by sentence-transformers: a tiny random BERT, mean pooling."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_models
    from transformers import AutoModel

    from simpair.models.tiny import _bundled_tokenizer, tiny_config

    body = root / "st-body"
    tokenizer = _bundled_tokenizer()
    torch.manual_seed(0)
    AutoModel.from_config(tiny_config(len(tokenizer))).save_pretrained(body)
    tokenizer.save_pretrained(body)
    modules = [st_models.Transformer(str(body)), st_models.Pooling(32, "mean"), st_models.Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(root / "team-st-model"))
    return root / "team-st-model"


def score_with_a_model_the_user_brings(run: Run, folder: Path, inbox: Path, out: Path) -> None:
    """`simpair score --model` on a sentence-transformers folder, as it is: no training, no registry."""
    score = run("score", "--no-prefect", "--inbox", str(inbox), "--out", str(out), "--model", str(folder))
    assert score.returncode == 0, score.stdout + score.stderr
    # an embedding model is adopted for graded similarity; with no dev file, auto precision means fp32
    assert "auto: fp32 (no precision verdict: imported without a dev file)" in " ".join(
        score.stdout.split()
    ), score.stdout
    rows = pa.concat_tables(
        [pq.read_table(p) for p in out.rglob("*.parquet") if not {"_rejects", "_ledger"} & set(p.parts)]
    )
    assert rows.num_rows == 24 and rows.column("score").null_count == 0, rows.schema


def import_it_and_let_a_smoke_night_beat_it(run: Run, folder: Path, work: Path, sources: Path) -> None:
    """`simpair models import` makes the folder the champion (the registry has none); a smoke night
    then trains a tiny challenger (the smoke train) whose gate compares it with that champion."""
    imported = run("models", "import", str(folder), "--task", "paraphrase", "--json", "-")
    assert imported.returncode == 0, imported.stdout + imported.stderr
    registered = json.loads(imported.stdout)
    assert (registered["name"], registered["alias"]) == ("simpair-paraphrase", "champion"), registered
    # the logged pyfunc carries the installed domain package only: no Prefect layer, no package data
    home = Path(json.loads(run("info", "--json", "-").stdout)["home"])
    (code,) = [c for c in home.rglob("code/simpair") if c.is_dir()]
    assert (code / "runtime" / "loader.py").is_file() and (code / "runtime" / "pyfunc_entry.py").is_file()
    shipped = {p.name for p in code.iterdir()}
    assert not {"cli", "tasks", "ops", "flows", "configs", "data_contracts"} & shipped, shipped

    config, profile = work / "team-smoke.yaml", work / "team-night.yaml"
    config.write_text(TRAIN_CONFIG)
    profile.write_text(NIGHT_PROFILE.format(config=config))
    contracts = {"SIMPAIR_CONTRACTS": str(work.parent / "contracts")}
    night = run(
        "nightly", "--no-prefect", "--force", "--profile", str(profile), "--sources", str(sources),
        extra_env=contracts,
    )  # fmt: skip
    assert night.returncode == 0, night.stdout + night.stderr
    listed = run("models", "--json", "-")
    assert listed.returncode == 0, listed.stderr
    versions = {
        row["version"]: row for row in json.loads(listed.stdout) if row["model"] == "simpair-paraphrase"
    }
    challenger = versions[str(int(registered["version"]) + 1)]
    assert challenger["gate"] != "not gated", challenger
    assert f"(v{registered['version']})" in challenger["compared with"], challenger
    trained = list((Path(json.loads(run("info", "--json", "-").stdout)["home"]) / "models").glob("*"))
    assert any((m / "simpair.json").is_file() for m in trained), trained


@pytest.mark.integration
def test_wheel_installs_and_runs_a_first_hour_outside_the_checkout(tmp_path: Path) -> None:
    started = time.monotonic()
    # the checkout: git's view, and its own pipeline home (ignored by git), which must not grow either
    checkout_before, checkout_home_before = _git_status(), _tree(ROOT / ".simpair")
    wheel = _build_wheel(tmp_path)
    built = time.monotonic()
    names = zipfile.ZipFile(wheel).namelist()
    # one installed namespace: no generic top-level `flows`/`tasks`/`cli` lands in site-packages
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"simpair"}
    for shipped in ("configs/nightly.yaml", "data_contracts/msrp.yaml", "data_contracts/scoring_input.yaml",
                    "flows/nightly_retrain.py"):  # fmt: skip
        assert f"simpair/{shipped}" in names, shipped
    venv, site = _fresh_venv(tmp_path, wheel)
    installed = time.monotonic()

    env = {**_base_env(tmp_path), "SIMPAIR_HOME": str(tmp_path / "home")}
    work = tmp_path / "work"  # the user's working directory, outside the checkout
    work.mkdir()

    def run(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "simpair"), *args],
            cwd=work,
            env={**env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )

    where = (
        "import simpair, simpair.settings as s\n"
        "from simpair.nightly.profile import load_profile\n"
        "print(simpair.__file__, s.CHECKOUT, load_profile('default').tasks['sts'].config_path())"
    )
    probe = subprocess.run(
        [venv / "bin" / "python", "-c", where], cwd=work, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert Path(probe[0]).is_relative_to(site) and not Path(probe[0]).is_relative_to(ROOT), probe
    assert probe[1] == "None"
    assert Path(probe[2]).is_relative_to(site) and Path(probe[2]).is_file(), probe  # profiles from the wheel
    venv_before = _tree(venv)

    version = run("--version")
    assert (version.returncode, version.stdout) == (0, "simpair 0.1.0\n"), version

    # info names where things go, before any of them exists, and creates none of them
    facts = run("info", "--json", "-", extra_env={"SIMPAIR_HOME": ""})
    assert facts.returncode == 0, facts.stderr
    info = json.loads(facts.stdout)
    assert info["checkout"] is None and info["sources"] is None
    assert info["home"] == str(tmp_path / "user" / ".local" / "share" / "simpair")  # the user data dir
    assert not Path(info["home"]).exists()
    assert Path(info["contracts"]).is_relative_to(site) and Path(info["configs"], "nightly.yaml").is_file()
    text = run("info")
    assert text.returncode == 0 and "sources:" in text.stdout and "SIMPAIR_SOURCES" in text.stdout, text
    assert not (tmp_path / "home").exists()

    # a command that needs sources, given none: one line that says how to give them
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    (contracts / "teampairs.yaml").write_text(CONTRACT)
    for prefect in (["--no-prefect"], []):  # refused before the flow (and Prefect's server) is started
        no_sources = run("ingest", *prefect, "--contracts", str(contracts))
        assert no_sources.returncode == 1, no_sources
        assert len(no_sources.stderr.strip().splitlines()) == 1, no_sources.stderr
        assert "--sources" in no_sources.stderr and "SIMPAIR_SOURCES" in no_sources.stderr
    assert not (tmp_path / "home").exists()  # refused before anything was written

    sources = tmp_path / "sources"
    _write_csv(sources / "teampairs" / "train.csv", _pairs(48, 0))
    _write_csv(sources / "teampairs" / "test.csv", _pairs(16, 100))
    ingest = run("ingest", "--no-prefect", "--sources", str(sources), "--contracts", str(contracts))
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    assert list((tmp_path / "home" / "datasets" / "teampairs").rglob("*.parquet")), ingest.stdout
    ingested = time.monotonic()

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    batch = _pairs(24, 500)
    table = pa.table(
        {"pair_id": [r[0] for r in batch], "text_a": [r[1] for r in batch], "text_b": [r[2] for r in batch]}
    )
    pq.write_table(table, inbox / "batch-001.parquet")
    folder = _sentence_transformers_folder(tmp_path / "brought")
    score_with_a_model_the_user_brings(run, folder, inbox, tmp_path / "scored")
    scored = time.monotonic()
    import_it_and_let_a_smoke_night_beat_it(run, folder, work, sources)

    timings = {
        "wheel": built - started,
        "venv+install": installed - built,
        "version/info/ingest": ingested - installed,
        "score with a sentence-transformers folder": scored - ingested,
        "import + smoke night": time.monotonic() - scored,
    }
    print("\ntimings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))

    # nothing under the new environment (its site-packages included), nothing in the checkout
    assert _tree(venv) == venv_before
    assert _git_status() == checkout_before
    assert _tree(ROOT / ".simpair") == checkout_home_before
