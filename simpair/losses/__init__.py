"""Training objectives, one per module, constructible by name from a config (`objective: cosent`).

| name | model | targets | module |
|---|---|---|---|
| bce | cross | 0/1 label or 0-1 score | binary_cross_entropy.py |
| softmax | bi | 0/1 label | softmax.py |
| cosine_mse | bi | 0-1 score or 0/1 | cosine_similarity.py |
| cosent | bi | 0-1 score or 0/1 | cosent.py |
| angle | bi | 0-1 score or 0/1 | angle.py |
| mnrl | bi | positives only (label 1 / score >= threshold) | multiple_negatives_ranking.py |
| online_contrastive | bi | 0/1 label | online_contrastive.py |
"""

from simpair.losses.angle import AnglELoss
from simpair.losses.binary_cross_entropy import BinaryCrossEntropyLoss
from simpair.losses.cosent import CoSENTLoss
from simpair.losses.cosine_similarity import CosineSimilarityLoss
from simpair.losses.multiple_negatives_ranking import MultipleNegativesRankingLoss
from simpair.losses.online_contrastive import OnlineContrastiveLoss
from simpair.losses.registry import (
    OBJECTIVES,
    build_objective,
    get_objective_class,
    objective_kind,
    register_objective,
)
from simpair.losses.softmax import SoftmaxLoss

__all__ = [
    "OBJECTIVES",
    "AnglELoss",
    "BinaryCrossEntropyLoss",
    "CoSENTLoss",
    "CosineSimilarityLoss",
    "MultipleNegativesRankingLoss",
    "OnlineContrastiveLoss",
    "SoftmaxLoss",
    "build_objective",
    "get_objective_class",
    "objective_kind",
    "register_objective",
]
