"""Calibration of a binary classifier's probabilities, judged against the constant predictor.

:func:`calibration_report` gives the expected calibration error (ECE: the row-weighted mean
gap between the mean predicted probability and the observed positive rate over equal-width
probability bins), the reliability-diagram bins, and the Brier score and log-loss of the model
next to those of the constant predictor that scores every row with the training prior. A model
whose Brier score or log-loss is worse than the constant predictor's adds nothing a reviewer
can rely on as a probability; the standard gates ``better_than_baseline(log_loss)`` and
``better_than_baseline(brier)`` fail it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fstrain.kernel.errors import InvalidArgumentError

_EPS = 1e-15


def _log_loss(y: np.ndarray, p: np.ndarray) -> float:
    q = np.clip(p, _EPS, 1 - _EPS)
    return float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))


def reliability_bins(y: np.ndarray, s: np.ndarray, n_bins: int) -> list[dict[str, Any]]:
    """Equal-width bins over [0, 1]: rows, mean predicted probability, observed rate."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
    out = []
    for b in range(n_bins):
        mask = which == b
        n = int(mask.sum())
        out.append({"lower": float(edges[b]), "upper": float(edges[b + 1]), "rows": n,
                    "mean_predicted": float(s[mask].mean()) if n else None,
                    "observed_rate": float(y[mask].mean()) if n else None})
    return out


def calibration_report(y_true: Any, y_score: Any, *, prior: float, n_bins: int = 10
                       ) -> dict[str, Any]:
    """ECE, reliability bins, and Brier/log-loss of the model and of the constant predictor.

    Args:
        y_true: 0/1 labels of the evaluation split.
        y_score: predicted positive-class probabilities in [0, 1].
        prior: the constant predictor's probability (the training split's positive rate).
        n_bins: equal-width probability bins.
    """
    y = np.asarray(y_true, dtype=float).ravel()
    s = np.asarray(y_score, dtype=float).ravel()
    if len(y) != len(s) or len(y) == 0:
        raise InvalidArgumentError(f"y_true and y_score need the same, non-zero length. Got "
                                   f"{len(y)} and {len(s)}.")
    if s.min() < 0 or s.max() > 1:
        raise InvalidArgumentError("y_score must be probabilities in [0, 1] for calibration.")
    bins = reliability_bins(y, s, n_bins)
    ece = sum(b["rows"] * abs(b["mean_predicted"] - b["observed_rate"])
              for b in bins if b["rows"]) / len(y)
    constant = np.full(len(y), float(prior))
    model_brier, const_brier = float(np.mean((s - y) ** 2)), float(np.mean((constant - y) ** 2))
    model_ll, const_ll = _log_loss(y, s), _log_loss(y, constant)
    return {
        "split": "test", "n_bins": n_bins, "ece": float(ece), "bins": bins,
        "brier": model_brier, "brier_constant": const_brier,
        "log_loss": model_ll, "log_loss_constant": const_ll, "constant_prior": float(prior),
        "worse_than_constant": [m for m, a, b in (("brier", model_brier, const_brier),
                                                  ("log_loss", model_ll, const_ll)) if a >= b],
    }
