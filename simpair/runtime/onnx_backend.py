"""ONNX Runtime forward pass for bulk scoring (`--backend onnx`), fp32, scores equal to torch's.

Why each piece is here (measured on the bundled MiniLM-L6 as a cross-encoder, 1 thread, MSRP pairs;
numbers in docs/experiments.md):

- **ONNX Runtime** instead of eager PyTorch: the same fp32 GEMMs with less per-op overhead.
- **Token-budget batches** (`MAX_BATCH_TOKENS` tokens, at most `batch_size` pairs): length-sorted
  batches of ~500 tokens keep a layer's activations in the CPU caches; 64-pair batches of long
  pairs (~3,500 tokens) do not, and ran ~1.4x slower with the very same FLOPs.
- **[CLS]-only last layer** for BERT cross-encoders: the classification head reads only the first
  token, so the last layer computes keys and values for every token but queries, attention output
  and feed-forward for [CLS] alone. Exact (same math on the row that is used), ~14% fewer FLOPs.
  Other architectures get the whole model exported as is.

ONNX Runtime's transformer optimizer (Attention / SkipLayerNorm / BiasGelu fusion) was measured too:
it fuses this model fully but gave no speed on 1-2 CPU threads (within noise, +2.5 s load), so it is
not used. Every exported graph is checked against the torch model on a probe batch with padding
before use; if the [CLS]-only graph disagrees by more than `VERIFY_ATOL`, or cannot be built, the
plain export is used instead. Nothing is written next to the model: the verified graph and ONNX
Runtime's optimized form of it are kept in the graph cache (`graph_cache`), so a later process loads
them instead of exporting, verifying and optimizing again.
"""

from __future__ import annotations

import logging
import math
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from simpair.atomic import commit, temp_path
from simpair.models import Predictor
from simpair.models.batching import pad_batch
from simpair.runtime import graph_cache
from simpair.runtime.budget import MAX_BATCH_TOKENS

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
VERIFY_ATOL = 1e-5
log = logging.getLogger(__name__)


class OrtEncoder(nn.Module):
    """Stands in for a CrossEncoder/BiEncoder: same call signature, forward pass in ONNX Runtime.

    The predictor L2-normalises bi-encoder outputs only for its own BiEncoder class, so this module
    normalises them itself (normalising twice would change nothing anyway).
    """

    def __init__(self, session: Any, kind: str, variant: str = "plain", lanes: int = 1) -> None:
        super().__init__()
        self.session = session
        self.kind = kind
        # batches run at once, each single-threaded on the one session (`session_options`)
        self.lanes = max(1, int(lanes))
        # the exporter drops inputs a graph never reads (token_type_ids of RoBERTa-style models)
        self.inputs = {item.name for item in session.get_inputs()}
        self.variant = variant  # "cls-last-layer" or "plain": which graph was exported (for reports)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None
    ) -> Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        feed = {
            "input_ids": input_ids.numpy(),
            "attention_mask": attention_mask.numpy(),
            "token_type_ids": token_type_ids.numpy(),
        }
        feed = {name: value for name, value in feed.items() if name in self.inputs}
        out = torch.from_numpy(np.asarray(self.infer(feed), dtype=np.float32))
        if self.kind == "bi":
            out = nn.functional.normalize(out, dim=-1)
        return out

    def infer(self, feed: dict[str, np.ndarray]) -> Any:
        """The graph's first output for `feed` (the runtime's own call: OpenVINO overrides it)."""
        return self.session.run(None, feed)[0]


class ClsLastLayerBert(nn.Module):
    """A BertForSequenceClassification whose last layer computes only the [CLS] row's output.

    Layers 1..L-1 are standard post-LayerNorm BERT layers (written out with the model's own Linear
    and LayerNorm modules, eager attention, so the export is one plain graph). In layer L the keys and
    values still come from every token, but the query, attention output, residual LayerNorm and
    feed-forward run on [CLS] alone: the pooler and head never read the other rows.
    """

    def __init__(self, hf_model: nn.Module) -> None:
        super().__init__()
        self.hf = hf_model
        config = hf_model.config
        self.heads = int(config.num_attention_heads)
        self.head_dim = int(config.hidden_size) // self.heads

    def _layer(
        self, layer: nn.Module, hidden: torch.Tensor, bias: torch.Tensor, cls_only: bool
    ) -> torch.Tensor:
        attn = layer.attention.self
        batch = hidden.shape[0]
        rows = hidden[:, :1] if cls_only else hidden

        def heads(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, -1, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(attn.query(rows)), heads(attn.key(hidden)), heads(attn.value(hidden))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + bias
        context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2)
        context = context.reshape(batch, -1, self.heads * self.head_dim)
        attended = layer.attention.output(context, rows)
        return layer.output(layer.intermediate(attended), attended)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        bert = self.hf.bert
        hidden = bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        mask = attention_mask[:, None, None, :].to(hidden.dtype)
        bias = (1.0 - mask) * torch.finfo(hidden.dtype).min
        layers = list(bert.encoder.layer)
        for i, layer in enumerate(layers):
            hidden = self._layer(layer, hidden, bias, cls_only=i == len(layers) - 1)
        logits = self.hf.classifier(self.hf.dropout(bert.pooler(hidden)))
        from simpair.models.cross_encoder import one_logit  # the modeling code: only when exporting

        return one_logit(logits).float()  # a two-label head as the CrossEncoder reads it


def cls_last_layer_model(model: nn.Module, kind: str) -> nn.Module | None:
    """The [CLS]-only rewrite of a cross-encoder if it is a plain BERT classifier, else None."""
    hf = getattr(model, "model", None)
    if kind != "cross" or hf is None or type(hf).__name__ != "BertForSequenceClassification":
        return None
    config = hf.config
    if getattr(config, "is_decoder", False) or getattr(config, "position_embedding_type", "absolute") not in (
        "absolute",
        None,
    ):
        return None
    if getattr(hf.bert, "pooler", None) is None:
        return None
    return ClsLastLayerBert(hf).eval()


def export_encoder(model: nn.Module, kind: str, path: Path) -> Path:
    """Export a torch CrossEncoder/BiEncoder (or its rewrite) with dynamic batch and sequence axes."""
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
    axes["output"] = {0: "batch"}
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about data-dependent branches in BERT
        torch.onnx.export(
            model.eval(),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(path),
            input_names=list(INPUTS),
            output_names=["output"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    return path


def session_options() -> Any:
    """A CPU session that runs each call on the calling thread, without spinning (nightly runs share
    machines).

    A scoring run's threads go to lanes instead (`OrtEncoder.lanes`, `token_stream.run_ahead`): that
    many batches at once through the one session (ONNX Runtime runs concurrent calls on a session),
    each single-threaded. On the token-budget batches scoring cuts (~500 tokens), splitting one
    batch's small matrices across threads paid poorly: on 2 cores, two batches at once ran 1.4x
    faster than one batch on 2 threads in int8 and 1.1x in fp32 (MiniLM-L6, 2026-11-29).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning threads burn a core waiting for work: good for latency, bad next to other jobs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


def _probe(predictor: Predictor) -> dict[str, torch.Tensor]:
    """A padded batch of different lengths (and both segments for cross-encoders) to verify graphs."""
    a = ["a short one", "a somewhat longer first sentence about the market and the year", "x"]
    b = ["and another", "the second text of this pair", "a second segment that is longer than the first"]
    tok = predictor.tokenizer
    enc = tok(a, b) if predictor.kind == "cross" else tok(a + b)
    return pad_batch(enc["input_ids"], tok.pad_token_id or 0, enc.get("token_type_ids"))


def open_session(path: Path, cache: Path | None = None, name: str | None = None, variant: str = "") -> Any:
    """A CPU session on an exported (or quantized) graph with this module's session options.

    With a cache entry and a `name`, ONNX Runtime's optimized graph is saved there as `ort-<name>.onnx`
    (with the graph's `variant`), for `cached_session` to load in later processes.
    """
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    options = session_options()
    if cache is None or name is None:
        return ort.InferenceSession(str(path), options, providers=providers)
    optimized = cache / f"ort-{name}.onnx"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ort.InferenceSession(str(path), options, providers=providers)
    tmp = temp_path(optimized)
    options.optimized_model_filepath = str(tmp)
    # ORT warns that an optimized graph may hold this CPU's kernels: the entry is keyed by its flags
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), options, providers=providers)
        if tmp.is_file():
            commit(tmp, optimized)
            graph_cache.seal(cache, optimized.name, {"variant": variant})
    finally:
        tmp.unlink(missing_ok=True)
    return session


def cached_session(cache: Path | None, name: str) -> tuple[Any, str] | None:
    """A session on the optimized graph `ort-<name>.onnx` a previous process saved, with the graph's
    variant, loaded with the optimizer off (its fusions are in it already); None when there is none
    whole (an unreadable one is reported and left to be rebuilt)."""
    import onnxruntime as ort

    hit = graph_cache.read(cache, f"ort-{name}.onnx")
    if hit is None or not hit[1].get("variant"):
        return None
    options = session_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(str(hit[0]), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # written by another ORT build or damaged in a way the checksum missed
        log.warning("optimized graph %s unreadable (%s); building it again", hit[0], exc)
        return None
    return session, str(hit[1]["variant"])


def export_verified(predictor: Predictor, threads: int, workdir: Path) -> tuple[Path, OrtEncoder]:
    """The fp32 graph that matched torch on the probe batch, kept in `workdir` for other passes (int8).

    The [CLS]-only graph when it applies and verifies, else the plain export; raises if even the plain
    export disagrees with torch.
    """
    torch_model = predictor.model.eval()
    batch = _probe(predictor)
    with torch.inference_mode():
        reference = torch_model(**batch).float()
        if predictor.kind == "bi":
            reference = nn.functional.normalize(reference, dim=-1)
    rewrite = cls_last_layer_model(torch_model, predictor.kind)
    if rewrite is not None:
        try:
            path = export_encoder(rewrite, "cross", workdir / "cls.onnx")
            encoder = OrtEncoder(open_session(path), "cross", "cls-last-layer", threads)
            diff = float((encoder(**batch) - reference).abs().max())
            if diff <= VERIFY_ATOL:
                return path, encoder
            log.warning("[CLS]-only ONNX graph differs by %.2e; using the plain export", diff)
        except Exception as exc:  # an architecture variant the rewrite does not cover
            log.warning("[CLS]-only ONNX export failed (%s); using the plain export", exc)
    path = export_encoder(torch_model, predictor.kind, workdir / "plain.onnx")
    encoder = OrtEncoder(open_session(path), predictor.kind, lanes=threads)
    diff = float((encoder(**batch) - reference).abs().max())
    if diff > VERIFY_ATOL:
        raise RuntimeError(f"ONNX export of {predictor.model_dir} differs from torch by {diff:.2e}")
    return path, encoder


def cache_entry(predictor: Predictor) -> Path | None:
    """The predictor's graph cache folder, or None (cache off, or a model not loaded from a folder)."""
    if predictor.model_dir is None:
        return None
    try:
        return graph_cache.entry(predictor.model_dir, predictor.kind)
    except OSError as exc:
        log.warning("no graph cache for %s (%s)", predictor.model_dir, exc)
        return None


def fp32_graph(predictor: Predictor, threads: int, workdir: Path) -> tuple[Path, str]:
    """The verified fp32 graph's path and variant: from the graph cache, else exported and verified
    in `workdir` (`export_verified`) and cached."""
    cache = cache_entry(predictor)
    hit = graph_cache.read(cache, "fp32.onnx")
    if hit is not None and hit[1].get("variant") in ("cls-last-layer", "plain"):
        return hit[0], str(hit[1]["variant"])
    path, encoder = export_verified(predictor, threads, workdir)
    cached = graph_cache.write(cache, "fp32.onnx", path, {"variant": encoder.variant})
    return cached or path, encoder.variant


def build_encoder(predictor: Predictor, threads: int) -> OrtEncoder:
    """The predictor's model in ONNX Runtime, the [CLS]-only graph when it applies and verifies
    (exported once per model and runtime version: later loads come from the graph cache)."""
    cache = cache_entry(predictor)
    hit = cached_session(cache, "fp32")
    if hit is not None:
        return OrtEncoder(hit[0], predictor.kind, hit[1], threads)
    with tempfile.TemporaryDirectory(prefix="simpair-onnx-") as tmp:
        path, variant = fp32_graph(predictor, threads, Path(tmp))
        return OrtEncoder(open_session(path, cache, "fp32", variant), predictor.kind, variant, threads)


class OrtPredictor(Predictor):
    """The predictor with its forward pass in ONNX Runtime and batches cut by a token budget.

    Tokenizing ahead of the model, length sorting, bi-encoder sentence dedup, thresholds and output
    mapping are the parent's; only the forward pass of a padded batch (`_forward`) differs, and a
    batch holds at most `batch_size` pairs and at most `max_batch_tokens` tokens counting padding
    (at least one pair).
    """

    def __init__(
        self, base: Predictor, encoder: OrtEncoder, max_batch_tokens: int = MAX_BATCH_TOKENS
    ) -> None:
        super().__init__(
            encoder, base.tokenizer, base.meta, model_dir=base.model_dir, device="cpu", precision="fp32"
        )
        self.max_batch_tokens = max_batch_tokens
        self.block_rows = base.block_rows
        self.lanes = encoder.lanes

    @property
    def variant(self) -> str:
        return self.model.variant

    def _forward(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        return self.model(**batch).numpy()


def use_onnx(predictor: Predictor, threads: int) -> OrtPredictor:
    """The predictor with its forward pass in ONNX Runtime (export verified against torch)."""
    return OrtPredictor(predictor, build_encoder(predictor, threads))
