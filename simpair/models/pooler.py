"""Freeze an encoder body's pooler when the model never reads it (bi-encoders, segment-cosine heads).

BERT-style bodies (`AutoModel`) build a pooler (a dense layer on [CLS]) whose output mean pooling and
the segment-cosine head ignore. Its parameters then get no gradient, and `DistributedDataParallel`
fails on step 1 ("Expected to have finished reduction ...") waiting for them. Freezing them
(`requires_grad=False`) takes them out of DDP's reduction and the optimiser without changing anything
else: they never trained before either, and they are still saved, so a saved model keeps the same
weights file (loadable by plain transformers with no missing-weight report), and checkpoints saved
before load unchanged. Dropping the module (`add_pooling_layer=False`) would instead make every load of
a checkpoint with pooler weights, the bundled backbone included, print an "unexpected keys" report, and
saved models would lack weights plain transformers expects. The `cls` cross-encoder's head reads the
pooler, so it is left alone there.
"""

from __future__ import annotations

from torch import nn


def unused_pooler(body: nn.Module) -> nn.Module | None:
    """The body's pooler module, if it has one (BERT, RoBERTa, MPNet, ...); None otherwise."""
    pooler = getattr(body, "pooler", None)
    return pooler if isinstance(pooler, nn.Module) else None


def freeze_unused_pooler(body: nn.Module) -> None:
    """Take the unread pooler out of training (no-op for bodies without one)."""
    pooler = unused_pooler(body)
    if pooler is not None:
        pooler.requires_grad_(False)
