"""Raw model outputs over cached tokens (dev evaluation during training, `evaluate_model`).

Same ordering trick as the predictor: batches sorted by length, results put back in input order.
"""

from __future__ import annotations

import numpy as np
import torch

from simpair.models.batching import pad_batch
from simpair.models.bi_encoder import BiEncoder
from simpair.models.cross_encoder import CrossEncoder
from simpair.models.device import autocast
from simpair.training.data import PairTokens, collate, iterate_sorted


@torch.inference_mode()
def raw_outputs(
    model: CrossEncoder | BiEncoder,
    pairs: PairTokens,
    pad_id: int,
    device: torch.device,
    dtype: torch.dtype | None,
    symmetric: bool = False,
    batch_size: int = 64,
) -> np.ndarray:
    """Cross: logits (averaged over both orders if symmetric). Bi: cosines. In the pairs' order."""
    was_training = model.training
    model.eval()
    out = np.zeros(len(pairs), dtype=np.float32)
    for idx in iterate_sorted(pairs, batch_size):
        if isinstance(model, CrossEncoder):
            values = []
            for reverse in (False, True) if symmetric else (False,):
                batch = collate(pairs, idx, pad_id, reverse=reverse)
                with autocast(device, dtype):
                    values.append(
                        model(
                            batch["input_ids"].to(device),
                            batch["attention_mask"].to(device),
                            batch["token_type_ids"].to(device),
                        ).float()
                    )
            out[idx] = torch.stack(values).mean(0).cpu().numpy()
        else:
            batch = collate(pairs, idx, pad_id)
            with autocast(device, dtype):
                u = model(batch["a_input_ids"].to(device), batch["a_attention_mask"].to(device))
                v = model(batch["b_input_ids"].to(device), batch["b_attention_mask"].to(device))
            out[idx] = torch.nn.functional.cosine_similarity(u.float(), v.float(), dim=-1).cpu().numpy()
    model.train(was_training)
    return out


@torch.inference_mode()
def sentence_embeddings(
    model: BiEncoder,
    token_lists: list[list[int]],
    pad_id: int,
    device: torch.device,
    dtype: torch.dtype | None,
    batch_size: int = 64,
) -> np.ndarray:
    """Embeddings of already-tokenized sentences (the bi-encoder's forward as it is), in input order."""
    was_training = model.training
    model.eval()
    lengths = np.fromiter((len(x) for x in token_lists), dtype=np.int64, count=len(token_lists))
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros((len(token_lists), model.hidden_size), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = pad_batch([token_lists[i] for i in idx], pad_id)
        with autocast(device, dtype):
            emb = model(batch["input_ids"].to(device), batch["attention_mask"].to(device))
        out[idx] = emb.float().cpu().numpy()
    model.train(was_training)
    return out
