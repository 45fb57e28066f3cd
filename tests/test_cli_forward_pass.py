"""`score`, `mine` and `encode` take one block of forward-pass options, declared once.

`--backend`, `--precision`, `--embedding-store/--no-embedding-store`, `--embedding-cache` and
`--embedding-memory-mb` are spliced into each command's signature by `forward_pass_options`, at the
place of its `forward` parameter, and reach the command as one `ForwardPass`. These tests read the
options typer built from the spliced signatures, and run each command on a combination its options
model refuses: the values must arrive whole, and the refusal is a usage error before any work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from simpair.cli import app
from simpair.defaults import DEFAULT_EMBEDDING_MEMORY_MB, DEFAULT_MINE_EMBEDDING_MEMORY_MB

BLOCK = ["backend", "precision", "embedding_store", "embedding_cache", "embedding_memory_mb"]
MEMORY_DEFAULT = {
    "score": DEFAULT_EMBEDDING_MEMORY_MB,
    "mine": DEFAULT_MINE_EMBEDDING_MEMORY_MB,
    "encode": DEFAULT_MINE_EMBEDDING_MEMORY_MB,
}
# what comes just before and just after the block in each command's --help
AROUND = {"score": ("threads", "rescore"), "mine": ("threads", "home"), "encode": ("threads", "home")}


def _params(command: str) -> list[Any]:
    """The options typer built for `simpair <command>` (its own click objects), in --help order."""
    return get_command(app).commands[command].params  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", sorted(MEMORY_DEFAULT))
def test_the_block_stands_where_the_command_put_it_with_its_own_defaults(command: str) -> None:
    params = {p.name: p for p in _params(command)}
    names = list(params)
    at = names.index("backend")
    assert names[at - 1 : at + len(BLOCK) + 1] == [AROUND[command][0], *BLOCK, AROUND[command][1]]
    assert "forward" not in names
    assert params["embedding_memory_mb"].default == MEMORY_DEFAULT[command]
    assert (params["backend"].default, params["precision"].default) == ("auto", "auto")
    assert params["embedding_store"].default is True
    cache_help = params["embedding_cache"].help or ""
    assert ("<out>/_ledger/embeddings" in cache_help) == (command == "score")


def test_the_three_commands_explain_the_shared_options_alike() -> None:
    helps = {
        command: {p.name: getattr(p, "help", None) for p in _params(command) if p.name in BLOCK}
        for command in MEMORY_DEFAULT
    }
    for name in ["backend", "precision", "embedding_store", "embedding_memory_mb"]:
        assert len({helps[command][name] for command in helps}) == 1, name


@pytest.mark.parametrize("command", sorted(MEMORY_DEFAULT))
def test_a_refused_combination_is_a_usage_error_before_any_work(command: str, tmp_path: Path) -> None:
    """`--embedding-cache` without the store: the options model's own check, as one usage error.

    That the check fires at all shows the spliced values reached the command's options model.
    """
    where = {
        "score": ["--inbox", str(tmp_path / "inbox"), "--out", str(tmp_path / "out")],
        "mine": ["--input", str(tmp_path / "in.parquet"), "--output", str(tmp_path / "pairs.parquet")],
        "encode": ["--input", str(tmp_path / "in.parquet"), "--output", str(tmp_path / "emb.parquet")],
    }[command]
    args = [command, *where, "--no-embedding-store", "--embedding-cache", str(tmp_path / "cache")]
    result = CliRunner().invoke(app, [*args, "--home", str(tmp_path / "home")], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    assert "embedding_cache keeps the embedding store: it needs embedding_store on" in result.output
    assert not (tmp_path / "home").exists() and not (tmp_path / "out").exists()
