"""The runtime options `simpair score`, `simpair mine` and `simpair encode` share (`RuntimeOptions`).

One definition, so the three commands spell and explain the forward pass, the precision and the
embedding store (and the sentence batch of the two that embed sentences) the same way; only the
default store folder and the memory default differ per command. `forward_pass_options` declares the
five options of the forward pass and the store once and splices them into each command's signature,
so a command's parameter list names the block instead of repeating it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from simpair.defaults import DEFAULT_BACKEND, DEFAULT_PRECISION

SentenceBatchOption = Annotated[int, typer.Option(min=1, help="Sentences per forward pass.")]
BackendOption = Annotated[
    str,
    typer.Option(help="Forward pass: auto (ONNX Runtime on CPU when installed, else torch), torch, or onnx."),
]
PrecisionOption = Annotated[
    str,
    typer.Option(
        help="auto (default: the fastest of fp32, bf16 and int8 that keeps the model's dev decisions: at "
        "most 0.5% of dev labels flip, dev metric within 0.002; read from the verdict stored with the "
        "model, fp32 without one, see `simpair models verdict`), fp32 (the fp32 reference), bf16 (where "
        "bf16 is native; not with --backend onnx) or int8 (quantized ONNX Runtime graph; refused unless "
        "a stored int8 check accepted it, see `simpair models int8-check`; not with --backend torch).",
    ),
]
EmbeddingStoreOption = Annotated[
    bool,
    typer.Option(
        help="Keep sentence vectors in a store for the whole run, so each distinct sentence is "
        "encoded once and a rerun after a kill reuses them (off: no store; bi-encoder scoring "
        "then dedups within a chunk only)."
    ),
]
EmbeddingMemoryOption = Annotated[
    float, typer.Option(min=0.001, help="Embedding store memory bound per process, MB (more goes to disk).")
]
_CACHE_HELP = (
    "Keep the embedding store in DIR across runs (one file per model version, weights, precision "
    "and forward pass; `simpair score`, `mine` and `encode` can share it). Default: {where}, "
    "removed when the run finishes."
)
ScoreCacheOption = Annotated[
    Path | None, typer.Option(metavar="DIR", help=_CACHE_HELP.format(where="<out>/_ledger/embeddings"))
]
OutputCacheOption = Annotated[
    Path | None, typer.Option(metavar="DIR", help=_CACHE_HELP.format(where="<output>.embeddings"))
]


@dataclasses.dataclass(frozen=True)
class ForwardPass:
    """The five forward-pass and store options as a command read them, named as the fields of
    `RuntimeOptions` (and so of `MineOptions` and `ScoringOptions`) they fill: `**forward.fields()`."""

    backend: str
    precision: str
    embedding_store: bool
    embedding_cache: Path | None
    embedding_memory_mb: float

    def fields(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The default of a command's `forward: ForwardPass` parameter: never used, since
# `forward_pass_options` replaces that parameter with the five options it stands for.
FORWARD_PASS: Any = None


def forward_pass_options(
    cache: Any, memory_mb: float
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--backend`, `--precision`, `--embedding-store/--no-embedding-store`, `--embedding-cache` and
    `--embedding-memory-mb`, declared once for `score`, `mine` and `encode`.

    They take the place of the command's `forward: ForwardPass = FORWARD_PASS` parameter in the
    signature typer reads, so `--help` lists them there, and reach the command gathered in that one
    `ForwardPass`. `cache` is the command's `--embedding-cache` (its default folder is the command's
    own), `memory_mb` its memory default.
    """
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    block = [
        inspect.Parameter("backend", kind, annotation=BackendOption, default=DEFAULT_BACKEND),
        inspect.Parameter("precision", kind, annotation=PrecisionOption, default=DEFAULT_PRECISION),
        inspect.Parameter("embedding_store", kind, annotation=EmbeddingStoreOption, default=True),
        inspect.Parameter("embedding_cache", kind, annotation=cache, default=None),
        inspect.Parameter("embedding_memory_mb", kind, annotation=EmbeddingMemoryOption, default=memory_mb),
    ]
    names = [parameter.name for parameter in block]

    def splice(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        parameters = list(signature.parameters.values())
        at = [parameter.name for parameter in parameters].index("forward")
        spliced = signature.replace(parameters=[*parameters[:at], *block, *parameters[at + 1 :]])

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> None:
            forward = ForwardPass(**{name: kwargs.pop(name) for name in names})
            command(*args, forward=forward, **kwargs)

        run.__signature__ = spliced  # type: ignore[attr-defined]  # what typer (inspect) reads
        run.__annotations__ = {p.name: p.annotation for p in spliced.parameters.values()}
        return run

    return splice
