"""Pre-tokenize every split a training config needs, so training and evaluation only read the cache."""

from __future__ import annotations

from pathlib import Path

from simpair.models.tiny import default_backbone
from simpair.models.tokenizer import load_tokenizer
from simpair.stages import step
from simpair.tokens import TokenSplit, pretokenize
from simpair.training.config import TrainConfig
from simpair.training.data import config_splits


def tokenizer_source(config: TrainConfig) -> str:
    """The tokenizer a config trains with ("tiny" models use the bundled backbone's tokenizer)."""
    if config.backbone in (None, "tiny"):
        return default_backbone()
    return config.backbone


@step("pretokenize", tags=("gpu",), retries=1, retry_delay_seconds=10, profile_retries=True)
def pretokenize_config(config: TrainConfig, home: Path) -> list[TokenSplit]:
    """Tokens for all of the config's splits (cached ones are reused, not rebuilt)."""
    tokenizer = load_tokenizer(tokenizer_source(config))
    return [
        pretokenize(
            Path(home), ref.dataset, ref.split, tokenizer, config.max_length, config.kind, ref.version
        )
        for ref in config_splits(config)
    ]
