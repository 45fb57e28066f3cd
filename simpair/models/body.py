"""The keyword inputs of a transformer body, as the bi- and cross-encoder modules call it.

Both are called as `forward(input_ids, attention_mask, token_type_ids=None)` (the batch loop in
`simpair.models.inference` passes token_type_ids only where the tokenizer made them), and both hand
the body the same inputs: RoBERTa-style bodies get no token_type_ids because their tokenizer has none.
"""

from __future__ import annotations

from torch import Tensor


def body_inputs(
    input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None
) -> dict[str, Tensor]:
    """input_ids and attention_mask, plus token_type_ids where given."""
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None:
        inputs["token_type_ids"] = token_type_ids
    return inputs
