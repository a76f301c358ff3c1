"""Validation metrics for classifiers, computed the same way for every trainer."""

from __future__ import annotations

import numpy as np

from fstrain.trainers.config import METRIC_MODES, TrainConfig
from validation.metrics import average_precision, roc_auc


def resolve_metric(config: TrainConfig, n_classes: int) -> tuple[str, str]:
    """The selection metric and its mode: ``auto`` → ``auc`` (binary) / ``logloss`` (multi)."""
    metric = config.metric
    if n_classes == 0:  # regression
        metric = "rmse" if metric == "auto" else metric
        return metric, METRIC_MODES[metric]
    if metric == "auto":
        metric = "auc" if n_classes == 2 else "logloss"
    if metric in ("pr_auc", "f1") and n_classes != 2:
        metric = "logloss"
    return metric, METRIC_MODES[metric]


def as_matrix(proba: np.ndarray, n_classes: int) -> np.ndarray:
    """Positive-class vector (binary) → ``(n, 2)`` matrix; matrices pass through."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim == 1:
        return np.column_stack([1.0 - proba, proba])
    return proba


def classification_metrics(y: np.ndarray, proba: np.ndarray, n_classes: int) -> dict[str, float]:
    """``auc``, ``pr_auc`` (binary), ``logloss``, ``accuracy`` and ``n`` for class indices ``y``.

    ``proba`` is the positive-class probability (binary) or the ``(n, K)`` class probabilities.
    AUC for multi-class is one-vs-rest macro; it is NaN when a class is absent from ``y``.
    """
    y = np.asarray(y, dtype=np.int64)
    mat = as_matrix(proba, n_classes)
    mat = np.clip(mat, 1e-15, 1.0)
    mat = mat / mat.sum(axis=1, keepdims=True)
    out: dict[str, float] = {
        # the mean negative log-probability of the true class (scikit-learn's log_loss on the
        # clipped, renormalised matrix, without its per-call input validation)
        "logloss": float(-np.log(mat[np.arange(len(y)), y]).mean()),
        "accuracy": float((mat.argmax(axis=1) == y).mean()),
        "n": float(len(y)),
    }
    present = np.unique(y)
    if n_classes == 2:
        if len(present) == 2:
            auc, pr_auc = roc_auc(y, mat[:, 1]), average_precision(y, mat[:, 1])
            # both classes are present: neither is None (None means one class only)
            assert auc is not None and pr_auc is not None
            out["auc"], out["pr_auc"] = auc, pr_auc
            out["f1"] = best_f1(y, mat[:, 1])
        else:
            out["auc"] = out["pr_auc"] = out["f1"] = float("nan")
    else:
        from sklearn.metrics import roc_auc_score

        if len(present) == n_classes:
            out["auc"] = float(roc_auc_score(y, mat, multi_class="ovr", average="macro"))
        else:
            out["auc"] = float("nan")
    return out


def best_f1(y: np.ndarray, score: np.ndarray) -> float:
    """Binary F1 at the score threshold that maximises it (predict positive when
    ``score >= t``, ``t`` one of the scores): the F1 a threshold tuned on this split reaches."""
    y = np.asarray(y, dtype=np.int64)
    score = np.asarray(score, dtype=np.float64)
    positives = int(y.sum())
    if positives == 0 or len(y) == 0:
        return float("nan")
    order = np.argsort(-score, kind="mergesort")
    s, t = score[order], y[order]
    tp = np.cumsum(t)
    predicted = np.arange(1, len(t) + 1)
    last = np.r_[s[1:] != s[:-1], True]  # a threshold keeps every row tied with it
    f1 = 2.0 * tp[last] / (predicted[last] + positives)
    return float(f1.max())


def regression_metrics(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """``rmse``, ``mae``, ``r2`` and ``n`` of predictions ``pred`` for targets ``y``."""
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    y = np.asarray(y, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    return {
        "rmse": float(np.sqrt(mean_squared_error(y, pred))),
        "mae": float(mean_absolute_error(y, pred)),
        "r2": float(r2_score(y, pred)) if len(np.unique(y)) > 1 else float("nan"),
        "n": float(len(y)),
    }


def is_better(value: float, best: float | None, mode: str, min_delta: float = 0.0) -> bool:
    """Whether ``value`` improves on ``best`` under ``mode``."""
    if best is None or np.isnan(best):
        return not np.isnan(value)
    if np.isnan(value):
        return False
    return value > best + min_delta if mode == "max" else value < best - min_delta
