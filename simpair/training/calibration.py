"""Map raw bi-encoder cosines to calibrated 0-1 outputs, fitted on dev only.

Both maps are sigmoid(a * cosine + b) (the `Calibration` stored in simpair.json), so they are strictly
increasing: rankings, hence Spearman and ROC-AUC, are exactly those of the cosine.
- paraphrase: Platt scaling (Platt, 1999), logistic regression of the 0/1 label on the cosine, gives a
  probability;
- graded: least squares of the gold 0-1 score on sigmoid(a * cos + b). Clipping the cosine to [0, 1]
  instead would tie every negative cosine at 0 (ranking objectives like CoSENT push unrelated pairs
  below 0) and lose their order.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares
from sklearn.linear_model import LogisticRegression

from simpair.models.metadata import Calibration


def platt(raw: np.ndarray, labels: np.ndarray) -> Calibration:
    model = LogisticRegression(C=1e4).fit(np.asarray(raw, dtype=np.float64).reshape(-1, 1), labels)
    return Calibration(a=float(model.coef_[0, 0]), b=float(model.intercept_[0]))


def graded(raw: np.ndarray, gold: np.ndarray) -> Calibration:
    x = np.asarray(raw, dtype=np.float64)
    y = np.asarray(gold, dtype=np.float64)

    def residuals(p: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-(p[0] * x + p[1]))) - y

    # Bounded a > 0 keeps the map increasing; start near the identity on [0, 1].
    fit = least_squares(residuals, x0=[6.0, -3.0], bounds=([1e-3, -100.0], [200.0, 100.0]))
    return Calibration(a=float(fit.x[0]), b=float(fit.x[1]))


def apply(calibration: Calibration, raw: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(calibration.a * np.asarray(raw, dtype=np.float64) + calibration.b)))
