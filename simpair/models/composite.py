"""The files that make a folder a composite model: `stack.json` (a stacked model), `cascade.json` (a cascade).

They are file formats, like `simpair.json`: the registry checks a downloaded composite is complete,
and tags a cascade's band on its version, without loading the ensemble code that runs them
(`simpair.runtime.stacked`, `simpair.runtime.cascade`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field

from simpair.models.metadata import ModelFile

STACK_FILE = "stack.json"
CASCADE_FILE = "cascade.json"
DEFAULT_MAX_DISAGREEMENT = 0.005  # share of decisions allowed to differ from the full cross-encoder's
# how many dev misses a band may leave for that share: "crc" (k + 1) / (n + 1) <= share, the default;
# "point" k <= share * n (cascades fitted before 2026-11-26 19:00 UTC, selection-biased on small dev sets)
BandRule = Literal["crc", "point"]
DEFAULT_BAND_RULE: BandRule = "crc"


class StackSpec(ModelFile):
    """Contents of `stack.json`: how member outputs and features become one raw score."""

    FILE = STACK_FILE
    MISSING = f"a stacked model needs {STACK_FILE}"
    WHAT = "stack spec"
    model_config = ConfigDict(extra="forbid")

    combiner: Literal["ridge", "logistic"]
    members: list[str]  # directories relative to the stacked model directory
    features: list[str]  # "member:<i>", LEXICAL_FEATURES and "product:<i>*<j>" names, in column order
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    regularisation: float  # ridge alpha or logistic C, chosen by cross-validation on dev


class CascadeSpec(ModelFile):
    """Contents of `cascade.json`: the two stages and the band of bi probabilities sent to the cross.

    A pair goes to the cross-encoder when `band_low < p_bi < band_high` (open interval): a band of
    width zero sends nothing, the band (-1, 2) sends everything.
    """

    FILE = CASCADE_FILE
    MISSING = f"a cascade model needs {CASCADE_FILE}"
    WHAT = "cascade spec"
    model_config = ConfigDict(extra="forbid")

    members: list[str] = Field(min_length=2, max_length=2)  # [bi, cross], relative to the model dir
    band_low: float
    band_high: float
    max_disagreement: float = DEFAULT_MAX_DISAGREEMENT
    band_rule: BandRule = "point"  # absent in cascade.json files written before the rule was recorded
    # what the band was fitted on, and what it did there
    dev_pairs: int = 0
    # misses the rule let the band leave outside, of the pairs fitted on: dev, and the pool (-1: none)
    dev_allowed_misses: int | None = None
    dev_share_to_cross: float = 0.0
    dev_disagreement: float = 0.0
    bi_calibration: str = ""  # where the bi stage's calibrated probability comes from
    # unlabeled pairs like the traffic, fitted on beside dev (the cross-encoder's decisions need no label)
    pool_source: str | None = None
    pool_pairs: int = 0
    pool_share_to_cross: float | None = None
    pool_disagreement: float | None = None

    def json_text(self) -> str:
        """Pydantic's own JSON, as `cascade.json` has always been written (`1e-05` reads `0.00001`)."""
        return self.model_dump_json(indent=2)

    def tags(self) -> dict[str, str]:
        """The `cascade.*` tags of an MLflow model version (values are strings)."""
        tags = {
            "cascade.band_low": f"{self.band_low:.6g}",
            "cascade.band_high": f"{self.band_high:.6g}",
            "cascade.max_disagreement": f"{self.max_disagreement:.6g}",
            "cascade.band_rule": self.band_rule,
            "cascade.dev_pairs": str(self.dev_pairs),
            "cascade.dev_share_to_cross": f"{self.dev_share_to_cross:.6g}",
            "cascade.dev_disagreement": f"{self.dev_disagreement:.6g}",
            "cascade.bi_calibration": self.bi_calibration,
        }
        if self.dev_allowed_misses is not None:
            tags["cascade.dev_allowed_misses"] = str(self.dev_allowed_misses)
        if self.pool_pairs and self.pool_share_to_cross is not None and self.pool_disagreement is not None:
            tags["cascade.pool_source"] = str(self.pool_source)
            tags["cascade.pool_pairs"] = str(self.pool_pairs)
            tags["cascade.pool_share_to_cross"] = f"{self.pool_share_to_cross:.6g}"
            tags["cascade.pool_disagreement"] = f"{self.pool_disagreement:.6g}"
        return tags


def member_dirs(model_dir: Path) -> list[Path] | None:
    """A composite's member folders (from `cascade.json` or `stack.json`); None for a single model.

    Raises ValueError when the spec file is there but unreadable.
    """
    for spec in (CascadeSpec, StackSpec):
        if (Path(model_dir) / spec.FILE).exists():
            return [Path(model_dir) / rel for rel in spec.read(model_dir).members]
    return None
