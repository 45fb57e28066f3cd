"""The rule that picks a WiSE-FT alpha, and its settings: pure, so the profile and the tests load it cheaply.

The night walks an alpha grid (`simpair.selection.wise_path`) and keeps the largest alpha whose every
choice canary is at or above the untrained backbone minus `canary_margin`, with dev within
`dev_tolerance` of the best alpha's dev. Choice canaries are never test splits: the choice tunes alpha.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

RULE = (
    "largest alpha whose every choice canary is at or above the untrained backbone minus the canary "
    "margin, with dev within the dev tolerance of the best alpha's dev; if none keeps every canary, the "
    "dev-eligible alpha whose worst canary delta is largest (ties: larger alpha)"
)
DEV_METRIC = {"sts": "spearman", "paraphrase": "accuracy"}  # as the soup chooses its ingredients
DEFAULT_ALPHAS = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


class ChoiceCanary(BaseModel):
    """A split, never trained on and not a test split, whose figure must not fall below the backbone's.

    With `unseen_groups` only the split's pairs of groups the model never trained on are kept: STS-B dev
    holds answers-forums and track5.en-en pairs, source groups its train split lacks, so they behave
    like a user's unseen STS pairs. Its figure falls with alpha where the fine-tune forgets what the
    backbone knew, which MSRP train ROC-AUC does not show (docs/experiments.md, 2026-11-26). When such a
    canary reads the model's own dev split, the dev criterion keeps only the trained groups' pairs.
    """

    model_config = ConfigDict(extra="forbid")

    dataset: str
    split: str
    max_pairs: int | None = Field(
        1000, ge=1, description="a seeded sample of this many pairs keeps the grid cheap; null: all"
    )
    unseen_groups: str | None = Field(
        None,
        description="regular expression over pair ids whose first capture group names a pair's group, as "
        "`simpair evaluate --group-pattern` (STS-B source files: '^(.+?)-\\d{4}'); only pairs of groups "
        "absent from the model's training pairs are kept",
    )

    @field_validator("unseen_groups")
    @classmethod
    def _group_pattern(cls, value: str | None) -> str | None:
        from simpair.metrics.groups import compile_group_pattern

        if value is not None:
            compile_group_pattern(value)  # pydantic names the field: `...canaries.0.unseen_groups`
        return value

    @property
    def split_label(self) -> str:
        """The split read: `dataset/split`."""
        return f"{self.dataset}/{self.split}"

    @property
    def label(self) -> str:
        """The canary's name in paths, tags and reports; two canaries on one split stay apart."""
        return self.split_label + (" unseen-groups" if self.unseen_groups else "")


class WiseFtPolicy(BaseModel):
    """How the night picks alpha (nightly profile, `tasks.<task>.wise_ft`)."""

    model_config = ConfigDict(extra="forbid")

    alphas: list[float] = Field(default_factory=lambda: list(DEFAULT_ALPHAS), min_length=1)
    canaries: list[ChoiceCanary] = Field(default_factory=list)
    canary_margin: float = Field(0.005, ge=0.0)
    dev_tolerance: float = Field(0.005, ge=0.0)
    seed: int = 0

    @field_validator("canaries")
    @classmethod
    def _distinct(cls, canaries: list[ChoiceCanary]) -> list[ChoiceCanary]:
        """A canary's label keys its figures, tags and skip reason: two with one label would mix."""
        labels = [c.label for c in canaries]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(
                f"two canaries named {', '.join(twice)}: keep one per split (and per unseen_groups)"
            )
        return canaries

    def grid(self) -> list[float]:
        """The alphas, largest first, each in [0, 1]."""
        bad = [a for a in self.alphas if not 0.0 <= a <= 1.0]
        if bad:
            raise ValueError(f"wise_ft.alphas must lie in [0, 1]; got {bad}")
        return sorted({round(float(a), 6) for a in self.alphas}, reverse=True)


@dataclass
class PathPoint:
    """One alpha: dev figure and each canary's figure (keyed `dataset/split/metric`)."""

    alpha: float
    dev: float
    canaries: dict[str, float]


def choose_alpha(
    path: Sequence[PathPoint], backbone: dict[str, float], policy: WiseFtPolicy
) -> tuple[float, str]:
    """(alpha, why) by `RULE`; pure, so it is checked on constructed paths."""
    if not path:
        raise ValueError("an empty WiSE-FT path has nothing to choose from")
    defined = [p for p in path if not math.isnan(p.dev)]
    best_dev = max(p.dev for p in defined) if defined else float("nan")
    eligible = [p for p in defined if p.dev >= best_dev - policy.dev_tolerance - 1e-12]

    def worst(point: PathPoint) -> float:
        deltas = [
            (v - backbone[k]) if not math.isnan(v) else -math.inf
            for k, v in point.canaries.items()
            if not math.isnan(backbone.get(k, math.nan))
        ]
        return min(deltas, default=math.inf)

    keeping = [p for p in eligible if worst(p) >= -policy.canary_margin - 1e-12]
    if keeping:
        pick = max(keeping, key=lambda p: p.alpha)
        return pick.alpha, (
            f"alpha {pick.alpha:g}: dev {pick.dev:.4f} (best {best_dev:.4f}, tolerance "
            f"{policy.dev_tolerance:g}), worst canary {worst(pick):+.4f} against the backbone "
            f"(margin {policy.canary_margin:g})"
        )
    pool = eligible or list(path)
    pick = max(pool, key=lambda p: (worst(p), p.alpha))
    return pick.alpha, (
        f"no alpha keeps every canary within {policy.canary_margin:g} of the backbone; alpha {pick.alpha:g} "
        f"comes closest among those with dev within {policy.dev_tolerance:g} of the best (worst canary "
        f"{worst(pick):+.4f}, dev {pick.dev:.4f})"
    )
