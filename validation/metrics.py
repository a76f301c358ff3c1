"""Model performance metrics for the model-validation pipeline.

Pure functions over numpy arrays. Every figure a compliance reviewer reads comes from here:
classification metrics at a decision threshold, threshold selection (on the *validation* split;
the pipeline then applies the chosen threshold to the *test* split), regression metrics,
percentile bootstrap confidence intervals and the trivial baselines a model must beat.

A metric that is undefined on the given data (e.g. ROC AUC when the evaluation set holds a single
class) is reported as ``None`` and its reason is recorded under ``"undefined"`` instead of raising
or silently returning 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from fstrain.kernel.errors import InvalidArgumentError

#: Direction of every metric this module produces: ``True`` when higher is better.
METRIC_DIRECTIONS: dict[str, bool] = {
    "accuracy": True,
    "balanced_accuracy": True,
    "precision": True,
    "recall": True,
    "f1": True,
    "roc_auc": True,
    "pr_auc": True,
    "log_loss": False,
    "brier": False,
    "mae": False,
    "mse": False,
    "rmse": False,
    "r2": True,
    "loss": False,
    "perplexity": False,
    "exact_match": True,
}

CLASSIFICATION_METRICS: tuple[str, ...] = (
    "accuracy", "balanced_accuracy", "precision", "recall", "f1", "roc_auc", "pr_auc",
    "log_loss", "brier",
)
REGRESSION_METRICS: tuple[str, ...] = ("mae", "mse", "rmse", "r2")
#: Metrics of a fine-tuned language model (held-out loss per response token, its perplexity,
#: exact match of greedy answers).
GENERATION_METRICS: tuple[str, ...] = ("loss", "perplexity", "exact_match")

_EPS = 1e-15


# --------------------------------------------------------------------------------------------
# input checking
# --------------------------------------------------------------------------------------------

def _as_binary_labels(y_true: Any, name: str = "y_true") -> np.ndarray:
    y = np.asarray(y_true).ravel()
    if y.dtype == bool:
        return y.astype(np.int8)
    try:
        yf = y.astype(float)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{name} must hold binary labels 0/1. Got non-numeric values such as {y[:3].tolist()!r}."
        ) from exc
    bad = ~np.isin(yf, (0.0, 1.0))
    if bad.any():
        raise InvalidArgumentError(
            f"{name} must hold binary labels 0/1. Got {y[bad][:5].tolist()!r} instead "
            f"({int(bad.sum())} offending rows); encode the positive class as 1."
        )
    return yf.astype(np.int8)


def _as_float(values: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{name} must be numeric. Got {values!r:.80} instead.") from exc
    if not np.all(np.isfinite(arr)):
        n_bad = int((~np.isfinite(arr)).sum())
        raise InvalidArgumentError(
            f"{name} must be finite. Got {n_bad} NaN/inf values; impute or drop those rows first."
        )
    return arr


def _check_lengths(**arrays: np.ndarray) -> int:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise InvalidArgumentError(f"Arrays must have the same length. Got {lengths}.")
    n = next(iter(lengths.values()))
    if n == 0:
        raise InvalidArgumentError(f"Arrays must not be empty. Got lengths {lengths}.")
    return n


# --------------------------------------------------------------------------------------------
# ranking metrics (fast numpy versions, checked against scikit-learn in the tests)
# --------------------------------------------------------------------------------------------

def roc_auc(y: np.ndarray, s: np.ndarray) -> float | None:
    """ROC AUC via the Mann-Whitney U statistic (ties count one half); None for one class."""
    from scipy.stats import rankdata

    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(s)
    u = ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def average_precision(y: np.ndarray, s: np.ndarray) -> float | None:
    """Average precision as scikit-learn defines it (step-wise, no interpolation)."""
    n_pos = int(y.sum())
    if n_pos == 0:
        return None
    order = np.argsort(-s, kind="mergesort")
    s_sorted = s[order]
    y_sorted = y[order]
    # last index of every distinct score (thresholds)
    distinct = np.where(np.diff(s_sorted))[0]
    idx = np.r_[distinct, len(y_sorted) - 1]
    tps = np.cumsum(y_sorted)[idx]
    fps = (idx + 1) - tps
    precision = tps / (tps + fps)
    recall = tps / n_pos
    recall_prev = np.r_[0.0, recall[:-1]]
    return float(np.sum((recall - recall_prev) * precision))


def _confusion(y: np.ndarray, pred: np.ndarray) -> dict[str, int]:
    tp = int(np.sum((pred == 1) & (y == 1)))
    fp = int(np.sum((pred == 1) & (y == 0)))
    fn = int(np.sum((pred == 0) & (y == 1)))
    tn = int(np.sum((pred == 0) & (y == 0)))
    return {"tn": tn, "fp": fp, "fn": fn, "tp": tp}


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den else None


# --------------------------------------------------------------------------------------------
# classification
# --------------------------------------------------------------------------------------------

def classification_metrics(y_true: Any, y_score: Any, threshold: float = 0.5) -> dict[str, Any]:
    """Binary classification metrics at a decision threshold.

    A row is predicted positive when ``y_score >= threshold``.

    Args:
        y_true: labels, 0/1 (or booleans).
        y_score: scores for the positive class. ``log_loss`` and ``brier`` need probabilities in
            [0, 1]; for other scores (margins) they are reported as ``None`` with a reason.
        threshold: decision threshold for the thresholded metrics and the confusion matrix.

    Returns:
        A JSON-serialisable dict with ``n``, ``positives``, ``negatives``, ``base_rate``,
        ``threshold``, ``accuracy``, ``balanced_accuracy``, ``precision``, ``recall``, ``f1``,
        ``roc_auc``, ``pr_auc`` (average precision), ``log_loss``, ``brier``,
        ``confusion_matrix`` (``tn``/``fp``/``fn``/``tp``) and ``undefined`` (metric → reason
        for every metric reported as ``None``).
    """
    y = _as_binary_labels(y_true)
    s = _as_float(y_score, "y_score")
    n = _check_lengths(y_true=y, y_score=s)
    threshold = float(threshold)
    if not math.isfinite(threshold):
        raise InvalidArgumentError(f"threshold must be a finite number. Got {threshold!r} instead.")

    undefined: dict[str, str] = {}
    pos = int(y.sum())
    neg = n - pos
    cm = _confusion(y, (s >= threshold).astype(np.int8))
    counts = _thresholded_metrics(cm, threshold, undefined)
    auc = roc_auc(y, s)
    if auc is None:
        undefined["roc_auc"] = (
            f"the evaluation set holds a single class ({pos} positives, {neg} negatives)"
        )
    pr_auc = average_precision(y, s)
    if pr_auc is None:
        undefined["pr_auc"] = "the evaluation set has no positive rows"
    log_loss, brier = _probability_losses(y, s, undefined)
    return {
        "n": n,
        "positives": pos,
        "negatives": neg,
        "base_rate": pos / n,
        "threshold": threshold,
        "accuracy": (cm["tp"] + cm["tn"]) / n,
        **counts,
        "roc_auc": auc,
        "pr_auc": pr_auc,
        "log_loss": log_loss,
        "brier": brier,
        "confusion_matrix": cm,
        "undefined": undefined,
    }


def _thresholded_metrics(cm: Mapping[str, int], threshold: float,
                         undefined: dict[str, str]) -> dict[str, float | None]:
    """Balanced accuracy, precision, recall and F1 from a confusion matrix (each undefined one
    gets its reason in ``undefined``)."""
    tp, fp, fn, tn = cm["tp"], cm["fp"], cm["fn"], cm["tn"]
    precision = _ratio(tp, tp + fp)
    if precision is None:
        undefined["precision"] = f"no row is predicted positive at threshold {threshold:g}"
    recall = _ratio(tp, tp + fn)
    tnr = _ratio(tn, tn + fp)
    if recall is None:
        undefined["recall"] = "the evaluation set has no positive rows"
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    if f1 is None:
        undefined["f1"] = "no positive rows and no positive predictions"
    balanced = (recall + tnr) / 2.0 if recall is not None and tnr is not None else None
    if balanced is None:
        undefined["balanced_accuracy"] = "the evaluation set holds a single class"
    return {"balanced_accuracy": balanced, "precision": precision, "recall": recall, "f1": f1}


def _probability_losses(y: np.ndarray, s: np.ndarray,
                        undefined: dict[str, str]) -> tuple[float | None, float | None]:
    """Log loss and Brier score, or None for both when the scores are not probabilities."""
    if s.min() < 0.0 or s.max() > 1.0:
        reason = "y_score is not a probability (values outside [0, 1])"
        undefined["log_loss"] = reason
        undefined["brier"] = reason
        return None, None
    p = np.clip(s, _EPS, 1 - _EPS)
    log_loss = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    return log_loss, float(np.mean((s - y) ** 2))


@dataclass(frozen=True)
class ThresholdChoice:
    """A decision threshold and how it was chosen.

    ``objective_value`` is the value of the objective (F1 or Youden's J) at ``threshold`` on the
    data the threshold was chosen on (normally the validation split); ``None`` for a fixed one.
    """

    threshold: float
    strategy: str
    objective_value: float | None
    n: int | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return asdict(self)


def choose_threshold(
    y_true: Any, y_score: Any, strategy: str | float = "f1", *,
    rows_from: str = "rows of the validation split",
) -> ThresholdChoice:
    """Choose a decision threshold on the validation split.

    Args:
        y_true: validation labels (0/1).
        y_score: validation scores.
        strategy: ``"f1"`` (maximise F1), ``"youden"`` (maximise TPR − FPR), or a number (a fixed
            threshold, returned as is). Ties pick the lowest threshold among the maxima.
        rows_from: where the rows come from, as the detail reads it after their count
            (``"rows carved from the train split ..."`` when the version has no validation
            split of its own).

    Returns:
        A :class:`ThresholdChoice`. Rows are predicted positive when ``score >= threshold``.
    """
    if isinstance(strategy, (int, float)) and not isinstance(strategy, bool):
        t = float(strategy)
        if not math.isfinite(t):
            raise InvalidArgumentError(f"A fixed threshold must be finite. Got {strategy!r}.")
        return ThresholdChoice(t, "fixed", None, None, f"fixed threshold {t:g} from configuration")
    if strategy not in ("f1", "youden"):
        raise InvalidArgumentError(
            f"strategy must be 'f1', 'youden' or a number. Got {strategy!r} instead."
        )
    y = _as_binary_labels(y_true)
    s = _as_float(y_score, "y_score")
    n = _check_lengths(y_true=y, y_score=s)
    pos = int(y.sum())
    if pos == 0 or pos == n:
        raise InvalidArgumentError(
            f"Cannot choose a threshold by {strategy!r}: the validation data holds a single class "
            f"({pos} positives of {n} rows). Use a fixed threshold instead."
        )
    thresholds = np.unique(s)  # ascending; predicting positive at score >= t
    order = np.argsort(-s, kind="mergesort")
    tp_cum = np.cumsum(y[order])
    # for each distinct threshold t, count rows with score >= t
    counts = n - np.searchsorted(np.sort(s), thresholds, side="left")
    tp = tp_cum[counts - 1]
    fp = counts - tp
    fn = pos - tp
    if strategy == "f1":
        objective = 2 * tp / (2 * tp + fp + fn)
    else:
        objective = tp / pos - fp / (n - pos)
    best = int(np.argmax(objective))  # first maximum = lowest threshold
    t = float(thresholds[best])
    name = "F1" if strategy == "f1" else "Youden's J (TPR - FPR)"
    return ThresholdChoice(
        t, strategy, float(objective[best]), n,
        f"threshold maximising {name} on {n} {rows_from}",
    )


# --------------------------------------------------------------------------------------------
# regression
# --------------------------------------------------------------------------------------------

def regression_metrics(y_true: Any, y_pred: Any) -> dict[str, Any]:
    """Regression metrics: ``mae``, ``mse``, ``rmse`` and ``r2`` (plus ``n``, ``target_mean``).

    R² is ``None`` (with a reason under ``"undefined"``) when ``y_true`` is constant.
    """
    y = _as_float(y_true, "y_true")
    p = _as_float(y_pred, "y_pred")
    n = _check_lengths(y_true=y, y_pred=p)
    err = p - y
    mse = float(np.mean(err**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    undefined: dict[str, str] = {}
    r2: float | None
    if ss_tot == 0.0:
        r2 = None
        undefined["r2"] = "y_true is constant, so R² is undefined"
    else:
        r2 = 1.0 - float(np.sum(err**2)) / ss_tot
    return {
        "n": n,
        "target_mean": float(y.mean()),
        "mae": float(np.mean(np.abs(err))),
        "mse": mse,
        "rmse": math.sqrt(mse),
        "r2": r2,
        "undefined": undefined,
    }


# --------------------------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------------------------

MetricFn = Callable[[np.ndarray, np.ndarray], "float | None"]


def _threshold_metric(name: str, threshold: float) -> MetricFn:
    def fn(y: np.ndarray, s: np.ndarray) -> float | None:
        pred = (s >= threshold).astype(np.int8)
        cm = _confusion(y, pred)
        tp, fp, fn_, tn = cm["tp"], cm["fp"], cm["fn"], cm["tn"]
        if name == "accuracy":
            return (tp + tn) / len(y)
        if name == "precision":
            return _ratio(tp, tp + fp)
        if name == "recall":
            return _ratio(tp, tp + fn_)
        if name == "f1":
            return _ratio(2 * tp, 2 * tp + fp + fn_)
        if name == "balanced_accuracy":
            r, t = _ratio(tp, tp + fn_), _ratio(tn, tn + fp)
            return None if r is None or t is None else (r + t) / 2
        raise KeyError(name)

    return fn


def metric_function(name: str, threshold: float = 0.5) -> MetricFn:
    """Return ``fn(y_true, y_score) -> float | None`` for a classification metric name."""
    if name == "roc_auc":
        return roc_auc
    if name == "pr_auc":
        return average_precision
    if name == "brier":
        return lambda y, s: float(np.mean((s - y) ** 2))
    if name == "log_loss":
        def _ll(y: np.ndarray, s: np.ndarray) -> float:
            p = np.clip(s, _EPS, 1 - _EPS)
            return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
        return _ll
    if name in ("accuracy", "precision", "recall", "f1", "balanced_accuracy"):
        return _threshold_metric(name, float(threshold))
    raise InvalidArgumentError(
        f"No bootstrap function for metric {name!r}. Known: "
        f"{', '.join(CLASSIFICATION_METRICS)}."
    )


def bootstrap_ci(
    metric_fn: Callable[[np.ndarray, np.ndarray], float | None],
    y_true: Any,
    y_score: Any,
    *,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, Any]:
    """Percentile bootstrap confidence interval of ``metric_fn(y_true, y_score)``.

    Rows are resampled with replacement ``n_resamples`` times using ``numpy.random.default_rng
    (seed)`` (no global RNG is touched), so the same seed gives the same interval. Resamples on
    which the metric is undefined (``None``/NaN, e.g. a single class) are dropped and counted.

    Returns:
        ``{"estimate", "lower", "upper", "alpha", "n_resamples", "n_valid", "seed", "method"}``;
        ``lower``/``upper`` are ``None`` when fewer than 2 resamples gave a value.
    """
    if n_resamples < 1:
        raise InvalidArgumentError(f"n_resamples must be >= 1. Got {n_resamples!r} instead.")
    if not 0.0 < alpha < 1.0:
        raise InvalidArgumentError(f"alpha must be in (0, 1). Got {alpha!r} instead.")
    y = np.asarray(y_true).ravel()
    s = np.asarray(y_score, dtype=float).ravel()
    n = _check_lengths(y_true=y, y_score=s)
    estimate = metric_fn(y, s)
    rng = np.random.default_rng(seed)
    values: list[float] = []
    for _ in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        v = metric_fn(y[idx], s[idx])
        if v is not None and math.isfinite(v):
            values.append(float(v))
    lower = upper = None
    if len(values) >= 2:
        lower = float(np.quantile(values, alpha / 2))
        upper = float(np.quantile(values, 1 - alpha / 2))
    return {
        "estimate": None if estimate is None else float(estimate),
        "lower": lower,
        "upper": upper,
        "alpha": alpha,
        "n_resamples": n_resamples,
        "n_valid": len(values),
        "seed": seed,
        "method": "percentile bootstrap",
    }


def classification_cis(
    y_true: Any,
    y_score: Any,
    threshold: float = 0.5,
    *,
    metrics: Sequence[str] = ("roc_auc", "pr_auc", "f1", "precision", "recall", "accuracy"),
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Bootstrap CIs for several classification metrics (same seed for each, see bootstrap_ci)."""
    y = _as_binary_labels(y_true)
    s = _as_float(y_score, "y_score")
    _check_lengths(y_true=y, y_score=s)
    out: dict[str, dict[str, Any]] = {}
    for name in metrics:
        if name in ("log_loss", "brier") and (s.min() < 0 or s.max() > 1):
            continue
        out[name] = bootstrap_ci(
            metric_function(name, threshold), y, s,
            n_resamples=n_resamples, alpha=alpha, seed=seed,
        )
    return out


# --------------------------------------------------------------------------------------------
# exact intervals of a proportion (slice rates: a few positives make a bootstrap degenerate)
# --------------------------------------------------------------------------------------------

def _check_counts(k: int, n: int, alpha: float) -> None:
    if not (isinstance(k, (int, np.integer)) and isinstance(n, (int, np.integer))
            and 0 <= k <= n):
        raise InvalidArgumentError(
            f"A proportion needs whole counts 0 <= k <= n. Got k={k!r}, n={n!r} instead.")
    if not 0.0 < alpha < 1.0:
        raise InvalidArgumentError(f"alpha must be in (0, 1). Got {alpha!r} instead.")


def wilson_interval(k: int, n: int, alpha: float = 0.05) -> list[float] | None:
    """Wilson score interval of the proportion ``k / n`` (``None`` when ``n`` is 0)."""
    _check_counts(k, n, alpha)
    if n == 0:
        return None

    z = NormalDist().inv_cdf(1 - alpha / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def clopper_pearson_interval(k: int, n: int, alpha: float = 0.05) -> list[float] | None:
    """Clopper–Pearson ("exact") interval of the proportion ``k / n``: the beta quantiles,
    ``[0, …]`` at ``k = 0`` and ``[…, 1]`` at ``k = n`` (``None`` when ``n`` is 0). It covers
    at least ``1 - alpha`` for every true rate, which a percentile bootstrap of a slice with
    three positives does not (every resample gives the same 0 or 1)."""
    _check_counts(k, n, alpha)
    if n == 0:
        return None
    from scipy.stats import beta

    lower = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return [lower, upper]


# --------------------------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------------------------

def baseline_metrics(
    y_true: Any,
    *,
    task: str = "classification",
    prior: float | None = None,
) -> dict[str, Any]:
    """Metrics of the trivial baseline on the evaluation labels.

    Classification: the *majority-class / prior* predictor, which scores every row with the
    positive-class prior and predicts the majority class (threshold 0.5). Regression: the *mean*
    predictor. Pass ``prior`` = the training split's positive rate (or target mean); if omitted,
    the evaluation set's own rate/mean is used (and ``prior_source`` says so).

    Returns:
        The same metric dict as :func:`classification_metrics` / :func:`regression_metrics`,
        plus ``baseline`` (its name), ``prior`` and ``prior_source``.
    """
    if task == "classification":
        y = _as_binary_labels(y_true)
        p = float(y.mean()) if prior is None else float(prior)
        if not 0.0 <= p <= 1.0:
            raise InvalidArgumentError(f"prior must be a probability in [0, 1]. Got {prior!r}.")
        out = classification_metrics(y, np.full(len(y), p), threshold=0.5)
        out["baseline"] = "majority_class_prior"
    elif task == "regression":
        y = _as_float(y_true, "y_true")
        p = float(y.mean()) if prior is None else float(prior)
        out = regression_metrics(y, np.full(len(y), p))
        out["baseline"] = "mean_predictor"
    else:
        raise InvalidArgumentError(
            f"task must be 'classification' or 'regression'. Got {task!r} instead."
        )
    out["prior"] = p
    out["prior_source"] = "evaluation split" if prior is None else "given (training split)"
    return out


def compare_to_baseline(
    metrics: Mapping[str, Any], baseline: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Per-metric ``{"model", "baseline", "delta", "better"}`` for metrics present in both.

    ``delta`` is model − baseline; ``better`` respects each metric's direction
    (:data:`METRIC_DIRECTIONS`) and is ``None`` when either side is undefined.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, higher in METRIC_DIRECTIONS.items():
        if name not in metrics or name not in baseline:
            continue
        m, b = metrics[name], baseline[name]
        if m is None or b is None:
            out[name] = {"model": m, "baseline": b, "delta": None, "better": None}
            continue
        delta = float(m) - float(b)
        out[name] = {
            "model": float(m), "baseline": float(b), "delta": delta,
            "better": delta > 0 if higher else delta < 0,
        }
    return out
