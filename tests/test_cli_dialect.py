"""Every `simpair` command speaks one dialect: exit codes, `error:` lines, `--json`, default model, output.

- A refusal is one `error:` line on stderr and exit 1, nothing on stdout; a traceback only with --debug.
- `--strict` turns "finished, but rows were quarantined or rejected" into exit 3.
- `--json PATH` writes the result to PATH, `--json -` to stdout, which then holds the JSON only.
- Without `--model`, a command uses its task's champion, and its --help says so.
- Other libraries' log lines stay off the console; piped output and piped --help are never wrapped.
- An empty registry fails at once, saying how to get a model.

The stderr/stdout split and the exit code of the real process are checked through `.venv/bin/simpair`
where `CliRunner` would hide them (it calls the command underneath the app's own error handling).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from ingest_helpers import TOY_CONTRACT
from rich.console import Console
from test_scoring_support import make_pairs, write_batch
from typer.testing import CliRunner

from simpair.cli import app
from simpair.cli.common import PIPED_WIDTH
from simpair.cli.failures import SimpairTyper
from simpair.cli.score_cmd import print_summary
from simpair.models import save_tiny_model
from simpair.scoring.summary import ScoreSummary, precision_note

SIMPAIR = str(Path(sys.executable).with_name("simpair"))


def _run(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a fresh process, with its own home and tracking store."""
    environ = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "SIMPAIR_DEBUG")}
    environ.update(SIMPAIR_HOME=str(home), **env)
    return subprocess.run([SIMPAIR, *args], capture_output=True, text=True, env=environ, timeout=300)


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def test_empty_registry_fails_at_once_with_what_to_do(tmp_path: Path) -> None:
    """On a fresh home `simpair score` (through Prefect by default) used to start Prefect, retry the
    model lookup and print `no model:` on stdout with exit 4, after 47 s on 2 cores."""
    (tmp_path / "inbox").mkdir()
    args = ["score", "--inbox", str(tmp_path / "inbox"), "--out", str(tmp_path / "out")]
    done = _run(args, tmp_path / "h")
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    line = _one_error_line(done.stderr)
    assert line.startswith("error: no model simpair-paraphrase@champion in the registry at sqlite:")
    assert "`simpair nightly`" in line and "`simpair models import DIR --task paraphrase`" in line
    assert not (tmp_path / "h" / "mlflow" / "mlflow.db").exists()  # nothing created to say no
    # at once: the refusal comes before Prefect, MLflow or torch is imported (1.4 s measured, not 47 s)
    traced = _run(args, tmp_path / "h", PYTHONPROFILEIMPORTTIME="1")
    imported = {
        row.split("|")[-1].strip() for row in traced.stderr.splitlines() if row.startswith("import time:")
    }
    assert "simpair.cli" in imported and traced.returncode == 1
    assert not {"prefect", "mlflow", "torch"} & imported, sorted({"prefect", "mlflow", "torch"} & imported)


def test_models_on_an_empty_registry_hints_and_reports_json(home: Path) -> None:
    result = CliRunner().invoke(app, ["models", "--home", str(home), "--json", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []  # stdout holds the JSON only
    assert "no model registered in" in result.stderr and "simpair models import DIR" in result.stderr


def test_a_folder_that_is_no_model_is_one_error_line_with_the_traceback_on_request(tmp_path: Path) -> None:
    """Scoring errors used to print `no model: ...` over several lines on stdout and exit 4."""
    (tmp_path / "inbox").mkdir()
    (tmp_path / "not-a-model").mkdir()
    args = ["score", "--no-prefect", "--inbox", str(tmp_path / "inbox"), "--out", str(tmp_path / "out")]
    args += ["--model", str(tmp_path / "not-a-model")]
    done = _run(args, tmp_path / "h")
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    assert "not-a-model" in _one_error_line(done.stderr)
    debug = _run(["--debug", *args], tmp_path / "h")
    assert debug.returncode == 1 and debug.stdout == ""
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1].startswith("error: ")
    usage = _run(["score", "--inbox", "x", "--out", "y", "--chunk-rows", "0"], tmp_path / "h")
    assert usage.returncode == 2 and usage.stdout == "" and "--chunk-rows" in usage.stderr  # click's


def test_predict_json_to_stdout_quiet_libraries_and_the_default_in_help(tmp_path: Path) -> None:
    """`predict --json` was a flag; transformers warned `(800 > 512)` for a pair it then truncated."""
    model = save_tiny_model(tmp_path / "cross")
    long_text = " ".join(["word"] * 800)
    done = _run(["predict", long_text, "short", "--model", str(model), "--json", "-"], tmp_path / "h")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # stdout holds the JSON only; the table went to stderr
    assert result["truncated"] is True and result["model"] == str(model)
    assert "Token indices sequence length" not in done.stderr and "[transformers]" not in done.stderr
    assert "truncated" in done.stderr  # the table a person reads


def test_mlflow_lines_stay_off_the_console(tmp_path: Path) -> None:
    """`INFO mlflow.store.db.utils: Creating initial MLflow database tables...` on a fresh home."""
    done = _run(["rollback"], tmp_path / "h")
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    assert "mlflow" not in done.stderr.lower().replace("mlflow.db", "")
    assert "has no champion" in _one_error_line(done.stderr)


def test_help_names_each_default_model_and_is_not_cut_when_piped(tmp_path: Path) -> None:
    """Piped --help was 80 columns: `simpair-paraphr…`."""
    score = _run(["score", "--help"], tmp_path / "h")
    assert "…" not in score.stdout
    # wrapped between words, never mid-name: the default reads whole once the box is taken away
    words = " ".join(score.stdout.replace("│", " ").split())
    assert "simpair-paraphrase@champion (simpair-sts@champion with --task sts)" in words
    assert any("simpair-paraphrase@champion" in line for line in score.stdout.splitlines())
    defaults = {
        "predict": "simpair-paraphrase@champion",
        "evaluate": "simpair-paraphrase@champion",
        "encode": "simpair-sts@champion",
        "mine": "simpair-sts@champion",
    }
    for command, default in defaults.items():
        shown = _run([command, "--help"], tmp_path / "h").stdout
        assert default in shown and "…" not in shown, command


def test_predict_defaults_to_the_champion_not_the_newest_folder(home: Path) -> None:
    """predict and evaluate used to take the newest folder under <home>/models when --model was not given."""
    save_tiny_model(home / "models" / "newest")
    result = CliRunner().invoke(app, ["predict", "a", "b", "--home", str(home)])
    assert result.exit_code == 1
    assert "error: no model simpair-paraphrase@champion in the registry" in result.stderr
    sts = CliRunner().invoke(app, ["evaluate", "--task", "sts", "--home", str(home)])
    assert sts.exit_code == 1 and "--task sts`" in sts.stderr


def test_piped_tables_keep_paths_whole(tmp_path: Path) -> None:
    """A console that is not a terminal was 80 columns wide: a long model path was folded mid-name."""
    deep = tmp_path / ("a-rather-long-folder-name-for-a-model-" * 3) / "cross"
    model = save_tiny_model(deep)
    result = CliRunner().invoke(
        app, ["predict", "a", "b", "--model", str(model), "--home", str(tmp_path / "h")]
    )
    assert result.exit_code == 0, result.output
    assert any(str(model) in line for line in result.stdout.splitlines()), result.stdout


def _toy_sources(root: Path, bad_rows: int) -> tuple[Path, Path]:
    sources, contracts = root / "sources", root / "contracts"
    (sources / "toy").mkdir(parents=True)
    contracts.mkdir()
    lines = "".join(f"{i % 2}\tfirst sentence {i}\tsecond sentence {i}\n" for i in range(20))
    lines += "".join(f"7\tbad label {i}\tstill bad {i}\n" for i in range(bad_rows))
    (sources / "toy" / "train.tsv").write_text("label\ta\tb\n" + lines)
    (sources / "toy" / "test.tsv").write_text("label\ta\tb\n1\ttest one\ttest two\n")
    (contracts / "toy.yaml").write_text(TOY_CONTRACT)
    return sources, contracts


@pytest.mark.parametrize("bad_rows", [0, 2])
def test_ingest_strict_exits_3_when_rows_are_quarantined(tmp_path: Path, home: Path, bad_rows: int) -> None:
    sources, contracts = _toy_sources(tmp_path, bad_rows)
    args = ["ingest", "--sources", str(sources), "--contracts", str(contracts), "--home", str(home)]
    result = CliRunner().invoke(app, [*args, "--no-prefect", "--strict", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == (3 if bad_rows else 0), result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["datasets"][0]["splits"][0]["quarantined"] == bad_rows
    if bad_rows:
        assert "strict: 2 rows quarantined" in result.stderr
        again = CliRunner().invoke(app, [*args, "--no-prefect", "--report-json", str(tmp_path / "old.json")])
        assert again.exit_code == 0 and (tmp_path / "old.json").exists()  # the old spelling, still read


def test_score_strict_exits_3_on_rejected_rows_and_json_to_stdout(tmp_path: Path, home: Path) -> None:
    table = make_pairs(40, seed=3)
    text_b = table.column("text_b").to_pylist()
    text_b[1] = "  "  # rejected: blank text
    write_batch(
        table.set_column(2, "text_b", pa.array(text_b, pa.string())), tmp_path / "inbox" / "a.parquet"
    )
    model = save_tiny_model(tmp_path / "cross")
    args = ["score", "--inbox", str(tmp_path / "inbox"), "--out", str(tmp_path / "out"), "--home", str(home)]
    result = CliRunner().invoke(
        app, [*args, "--model", str(model), "--no-prefect", "--strict", "--json", "-"]
    )
    assert result.exit_code == 3, result.output
    summary = json.loads(result.stdout)  # the table went to stderr
    assert summary["rows_rejected"] == 1 and summary["rows_scored"] == 39
    assert "strict: 1 rows rejected, 0 files quarantined" in result.stderr


def test_an_unexpected_failure_over_several_lines_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A message with newlines (a YAML parser's, naming line and column) was printed as it was, over
    several lines after `error:`; `fail()` already joined its own."""
    monkeypatch.delenv("SIMPAIR_DEBUG", raising=False)
    demo = SimpairTyper()

    @demo.command()
    def parse() -> None:
        raise ValueError('while parsing a flow sequence\n  in "<unicode string>", line 1\n\nexpected')

    with pytest.raises(SystemExit) as ended:
        demo([], prog_name="demo")
    assert ended.value.code == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line == (
        'error: ValueError: while parsing a flow sequence in "<unicode string>", line 1 expected '
        "(--debug for the traceback)"
    )


def test_a_json_path_that_cannot_be_written_is_a_usage_error_before_any_work(tmp_path: Path) -> None:
    """`ingest --json /nonexistent/d/r.json` ingested everything, then failed with FileNotFoundError;
    `--json /tmp` with IsADirectoryError."""
    sources, contracts = _toy_sources(tmp_path, 0)
    home = tmp_path / "h"
    args = ["ingest", "--no-prefect", "--sources", str(sources), "--contracts", str(contracts)]
    for target, says in ((tmp_path / "no" / "r.json", "no folder"), (tmp_path, "is a folder")):
        result = CliRunner().invoke(app, [*args, "--home", str(home), "--json", str(target)])
        assert result.exit_code == 2, result.output
        assert says in result.stderr and "--json" in result.stderr
        assert not home.exists()  # nothing ingested
    info = CliRunner().invoke(app, ["info", "--home", str(home), "--json", str(tmp_path / "no" / "x.json")])
    assert info.exit_code == 2 and "no folder" in info.stderr and info.stdout == ""
    models = CliRunner().invoke(app, ["models", "--home", str(home), "--json", str(tmp_path)])
    assert models.exit_code == 2 and "is a folder" in models.stderr


def test_piped_score_totals_are_one_line_each() -> None:
    """The totals were the table's caption, which rich wraps to the table's width: piped, a narrow
    table printed `... quarantined | rows:` on one line and `6 scored, ...` on the next."""
    summary = ScoreSummary(
        run_id="20261129T1200Z-abc", model_name="simpair-paraphrase", model_version="3",
        files_seen=1, files_scored=1, rows_scored=6, rows_scored_this_run=6, pairs_per_s=41.5,
        files=[{"file": "a.parquet", "status": "scored", "detail": "6 rows"}],
        rescore="batches first scored in the last 7 days, with the new champion",
    )  # fmt: skip
    out = io.StringIO()
    print_summary(Console(file=out, width=PIPED_WIDTH), summary)
    lines = out.getvalue().splitlines()
    assert lines[0] == "scoring run 20261129T1200Z-abc with simpair-paraphrase/3 in fp32"
    assert any(line.startswith("files: 1 scored") and "| rows: 6 scored, 0 rejected" in line and
               line.rstrip().endswith(precision_note(summary)) for line in lines), out.getvalue()  # fmt: skip
    assert lines[-1] == "re-score: batches first scored in the last 7 days, with the new champion"
    assert any("a.parquet" in line and "6 rows" in line for line in lines)  # the per-file table


_NO_TORCH_SCRIPT = """
import json, sys
from simpair.cli import app
seen = {}
for args in (["predict", "a", "b"], ["evaluate"], ["evaluate", "--file", sys.argv[1]]):
    try:
        app(args, prog_name="simpair")
    except SystemExit as ended:
        seen[" ".join(args[:2])] = [ended.code, "torch" in sys.modules]
print(json.dumps(seen))
"""


def test_an_empty_registry_fails_before_torch_is_imported(tmp_path: Path) -> None:
    """`simpair predict a b` on a fresh home imported the predictor (torch, ~10 s on 2 cores) before
    looking for the model; `evaluate` and `evaluate --file` imported the evaluation modules first."""
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("text_a,text_b,label\\na,b,1\\n")
    environ = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "SIMPAIR_DEBUG")}
    done = subprocess.run(
        [sys.executable, "-c", _NO_TORCH_SCRIPT, str(pairs)], capture_output=True, text=True,
        env={**environ, "SIMPAIR_HOME": str(tmp_path / "h")}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "predict a": [1, False], "evaluate": [1, False], "evaluate --file": [1, False]
    }, done.stderr  # fmt: skip
    assert done.stderr.count("error: no model simpair-paraphrase@champion in the registry") == 3
