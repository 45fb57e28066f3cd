"""When tonight's traffic counts as moved: the thresholds of the nightly profile's `monitor:` block.

Every drift row compares one statistic of tonight's traffic profile with the model version's
reference (and with the last `history_nights` nights of the same version) and raises an alarm when
its value passes the threshold named here. The rules, and why each is an effect size rather than a
p-value: with 100k pairs a night, a Kolmogorov–Smirnov or chi-square p-value is tiny for any shift at
all, so it would alarm every night; an effect size (PSI, the KS statistic, a domain classifier's
ROC-AUC) means the same at 2k pairs and at 1M.

- `psi`: population stability index of each histogram (`tokens`, `rare`, `score`); the usual reading
  is < 0.1 stable, 0.1-0.25 moving, > 0.25 moved.
- `ks`: the two-sample Kolmogorov–Smirnov statistic (largest gap between the two cumulative shares).
- `positive_rate_shift`: absolute change of the share of pairs at or above the model's threshold.
- `truncated_shift`: absolute change of the share of pairs cut at `max_length`.
- `vector_auc`: ROC-AUC of a classifier telling tonight's sentence vectors from the reference's
  (cross-validated; 0.5 means indistinguishable). `mmd_p_value` is the kernel two-sample test's
  permutation p-value, alarmed only together with the AUC (the p-value alone is too quick at 512 rows).
- `health`: the run's own rates (of `rows_in`) and its speed against the history's median.
- `min_pairs`: fewer pairs than this and distribution rows are shown but never alarm (a 40-pair
  batch's histogram is noise).

Defaults were calibrated on dev and other splits (docs/monitoring.md): quiet when a model's traffic is
its own dataset's test split, alarmed by another domain, texts three times longer, or another model's
scores.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

STATISTICS = ("tokens", "rare", "score")


class HealthPolicy(BaseModel):
    """A run's health: rates of the rows that came in, and speed against the history's median."""

    model_config = ConfigDict(extra="forbid")

    rejected_rate: float = Field(0.05, ge=0, le=1)
    quarantined_rate: float = Field(0.05, ge=0, le=1)
    duplicates_rate: float = Field(0.5, ge=0, le=1)
    truncated_rate: float = Field(0.2, ge=0, le=1)
    # alarm when tonight's pairs/s falls below this share of the last nights' median
    speed_drop: float = Field(0.5, ge=0, le=1)


class MonitorPolicy(BaseModel):
    """The `monitor:` block of a nightly profile (unknown keys are an error naming them)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    history_nights: int = Field(30, ge=0)
    min_pairs: int = Field(200, ge=0)
    psi: dict[str, float] = Field(default_factory=lambda: {"tokens": 0.25, "rare": 0.25, "score": 0.25})
    ks: dict[str, float] = Field(default_factory=lambda: {"tokens": 0.2, "rare": 0.2, "score": 0.2})
    positive_rate_shift: float = Field(0.2, ge=0, le=1)
    truncated_shift: float = Field(0.1, ge=0, le=1)
    vector_auc: float = Field(0.8, ge=0.5, le=1)
    mmd_p_value: float = Field(0.01, ge=0, le=1)
    permutations: int = Field(200, ge=10)
    health: HealthPolicy = Field(default_factory=HealthPolicy)

    def model_post_init(self, _context: object) -> None:
        for name, rule in (("psi", self.psi), ("ks", self.ks)):
            unknown = set(rule) - set(STATISTICS)
            if unknown:
                raise ValueError(
                    f"monitor.{name}: unknown statistic(s) {sorted(unknown)}; known: {', '.join(STATISTICS)}"
                )
