"""Feature selection: rank a training split's features and flag the ones not to train on.

``fstrain select-features USE_CASE -t VERSION`` prints :func:`selection_report` for a version's
train split.

:func:`rank_features` covers the four families of checks in one table:

1. **Relevance** — mutual information between each feature and the label (scikit-learn's
   ``mutual_info_classif``/``mutual_info_regression``, k-NN estimator, ``random_state=seed``).
2. **Near-constant** — the most frequent value (nulls count as a value) covers at least 99 % of
   the rows, or a numeric feature has (almost) zero variance.
3. **Redundancy** — numeric features whose absolute Pearson correlation exceeds 0.95.
4. **Leakage** — a feature that alone predicts the label almost perfectly (single-feature AUC
   ≥ 0.99 or ≤ 0.01 for classification; R² ≥ 0.99 for regression), or whose event time is later
   than the label's for most rows.

Every statistic is computed on one seeded sample of at most ``max_rows`` rows (rows with a null
label are dropped first), so the result depends only on the data and ``seed`` and stays fast on
large frames.

Task detection: the label is a **classification** target when it is non-numeric, boolean, or an
integer with at most 20 distinct values; otherwise **regression**. The single-feature score is:

* binary classification, numeric feature: ROC AUC of the raw feature (≤ 0.01 means an inverted
  copy of the label);
* otherwise (categorical features, multiclass labels): ROC AUC (macro one-vs-rest for multiclass)
  of an out-of-fold (5-fold) target encoding of the feature, numeric features binned into at most
  32 quantile bins. Out-of-fold encoding keeps row identifiers from scoring as perfect predictors;
* regression: squared Pearson correlation for numeric features, out-of-fold target-encoding R²
  for categorical ones. The column is still named ``single_feature_auc``;
  ``table.attrs["single_feature_metric"]`` says ``"auc"`` or ``"r2"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    did_you_mean,
)

__all__ = ["rank_features", "selection_report"]

NEAR_CONSTANT_SHARE = 0.99
REDUNDANT_CORR = 0.95
LEAK_AUC = 0.99
LEAK_R2 = 0.99
LATE_EVENT_SHARE = 0.5
_MAX_CLASSES = 20
_BINS = 32
_FOLDS = 5
COLUMNS = [
    "feature",
    "mutual_information",
    "rank",
    "near_constant",
    "redundant_with",
    "single_feature_auc",
    "likely_leak",
    "leak_reason",
]


def _is_numeric(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype))


def _is_datetime(s: pd.Series) -> bool:
    return bool(pd.api.types.is_datetime64_any_dtype(s.dtype))


def _label(y: pd.Series | pd.DataFrame, n: int) -> pd.Series:
    if isinstance(y, pd.DataFrame):
        if y.shape[1] != 1:
            raise InvalidArgumentError(
                f"y must have exactly one label column. Got {y.shape[1]} columns "
                f"({', '.join(map(str, y.columns))}) instead. Rank against one label at a time."
            )
        y = y.iloc[:, 0]
    if not isinstance(y, pd.Series):
        y = pd.Series(np.asarray(y))
    if len(y) != n:
        raise InvalidArgumentError(f"y must have one value per row of X ({n}). Got {len(y)} instead.")
    return y.reset_index(drop=True)


def _is_classification(y: pd.Series) -> bool:
    if not _is_numeric(y) or pd.api.types.is_bool_dtype(y.dtype):
        return True
    values = y.dropna()
    if pd.api.types.is_integer_dtype(y.dtype) or (
        len(values) and np.all(np.mod(values.to_numpy(dtype="float64"), 1.0) == 0)
    ):
        return values.nunique() <= _MAX_CLASSES
    return False


def _encode(s: pd.Series) -> tuple[np.ndarray, bool]:
    """A float column for the MI estimator and whether it is discrete (ordinal-coded)."""
    if _is_datetime(s):
        t = pd.to_datetime(s, utc=True)
        x = t.astype("int64").astype("float64").to_numpy()
        x[t.isna().to_numpy()] = np.nan
    elif _is_numeric(s):
        x = s.to_numpy(dtype="float64", na_value=np.nan)
    else:
        codes, _ = pd.factorize(s.astype(object), use_na_sentinel=True)
        return codes.astype("float64"), True  # nulls get their own code (-1)
    x = x.copy()
    if np.isnan(x).all():
        return np.zeros_like(x), False
    x[~np.isfinite(x)] = np.nan
    x[np.isnan(x)] = np.nanmedian(x)
    return x, False


def _near_constant(s: pd.Series, x: np.ndarray, discrete: bool) -> bool:
    if len(s) == 0:
        return True
    share = float(s.value_counts(dropna=False, normalize=True).iloc[0])
    if share >= NEAR_CONSTANT_SHARE:
        return True
    if not discrete:
        scale = max(1.0, float(np.mean(x)) ** 2)
        return bool(np.var(x) <= 1e-12 * scale)
    return False


def _redundancy(frame: pd.DataFrame, numeric: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {c: [] for c in frame.columns}
    if len(numeric) < 2:
        return out
    corr = frame[numeric].astype("float64").corr().abs()
    for c in numeric:
        row = corr[c].drop(c).dropna()
        row = row[row > REDUNDANT_CORR].sort_values(ascending=False, kind="mergesort")
        out[c] = [str(v) for v in row.index]
    return out


def _bins(s: pd.Series) -> np.ndarray:
    """Category codes of a feature: values for categoricals, quantile bins for numerics."""
    if _is_numeric(s) or _is_datetime(s):
        x = pd.Series(_encode(s)[0])
        if x.nunique() <= _BINS:
            codes, _ = pd.factorize(x)
        else:
            codes = pd.qcut(x.rank(method="first"), _BINS, labels=False).to_numpy()
        codes = np.asarray(codes, dtype=np.int64)
        codes[s.isna().to_numpy()] = -1
        return codes
    codes, _ = pd.factorize(s.astype(object), use_na_sentinel=True)
    return codes.astype(np.int64)


def _oof_encoding(codes: np.ndarray, target: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """Out-of-fold smoothed mean of ``target`` (n × m) per code.

    Each held-out row gets ``(sum + prior) / (count + 1)`` over the other folds' rows of its code,
    so unseen codes get the fold's prior and singleton codes (row identifiers) carry no signal.
    """
    n, m = target.shape
    out = np.empty((n, m), dtype="float64")
    shifted = codes - codes.min()
    n_codes = int(shifted.max()) + 1
    for f in range(_FOLDS):
        fit = folds != f
        held = ~fit
        if not held.any() or not fit.any():
            out[held] = target.mean(axis=0)
            continue
        counts = np.bincount(shifted[fit], minlength=n_codes).astype("float64")
        prior = target[fit].mean(axis=0)
        for j in range(m):
            sums = np.bincount(shifted[fit], weights=target[fit, j], minlength=n_codes)
            means = (sums + prior[j]) / (counts + 1.0)
            out[held, j] = means[shifted[held]]
    return out


def _mi_discrete_oof(
    codes: np.ndarray, y_codes: np.ndarray | None, y_num: np.ndarray | None,
    folds: np.ndarray, seed: int,
) -> float:
    """MI of a high-cardinality categorical, estimated out of fold (identifiers score ~0).

    Classification: ``H(y) - cross-entropy`` of out-of-fold class frequencies per category (nats).
    Regression: k-NN MI between the out-of-fold target encoding and the label.
    """
    from sklearn.feature_selection import mutual_info_regression

    if y_codes is not None:
        n_classes = int(y_codes.max()) + 1
        onehot = np.eye(n_classes)[y_codes]
        probs = _oof_encoding(codes, onehot, folds)
        p_true = np.clip(probs[np.arange(len(y_codes)), y_codes], 1e-12, None)
        freq = onehot.mean(axis=0)
        entropy = float(-(freq[freq > 0] * np.log(freq[freq > 0])).sum())
        return max(0.0, entropy - float(-np.log(p_true).mean()))
    assert y_num is not None
    enc = _oof_encoding(codes, y_num[:, None], folds)
    return float(mutual_info_regression(enc, y_num, random_state=seed)[0])


def _mutual_information(
    Xs: pd.DataFrame, features: list[str], encoded: dict[str, np.ndarray],
    discrete: dict[str, bool], y_codes: np.ndarray | None, y_num: np.ndarray | None,
    folds: np.ndarray, seed: int,
) -> dict[str, float]:
    """MI per feature: continuous ones in one scikit-learn call, categoricals one by one."""
    from sklearn.feature_selection import mutual_info_classif, mutual_info_regression

    if (y_codes is not None and int(y_codes.max()) < 1) or (y_num is not None and np.ptp(y_num) == 0):
        return {c: 0.0 for c in features}  # a constant label carries no information
    estimate = mutual_info_classif if y_codes is not None else mutual_info_regression
    target = y_codes if y_codes is not None else y_num
    out: dict[str, float] = {c: 0.0 for c in features if np.ptp(encoded[c]) == 0}  # constant
    continuous = [c for c in features if not discrete[c] and c not in out]
    if continuous:
        values = estimate(np.column_stack([encoded[c] for c in continuous]), target,
                          discrete_features=False, random_state=seed)
        out.update(zip(continuous, (float(v) for v in values)))
    for c in features:
        if not discrete[c] or c in out:
            continue
        codes = encoded[c].astype(np.int64)
        if len(np.unique(codes)) <= _BINS:
            try:
                out[c] = float(estimate(codes[:, None], target, discrete_features=True,
                                        random_state=seed)[0])
                continue
            except ValueError:  # regression: every category a singleton
                pass
        out[c] = _mi_discrete_oof(codes, y_codes, y_num, folds, seed)
    return out


def _single_feature_score(
    s: pd.Series, y_codes: np.ndarray | None, y_num: np.ndarray | None, folds: np.ndarray
) -> float:
    from sklearn.metrics import r2_score, roc_auc_score

    if y_codes is not None:  # classification
        n_classes = int(y_codes.max()) + 1 if len(y_codes) else 0
        if n_classes < 2:
            return float("nan")
        if n_classes == 2 and _is_numeric(s):
            x = _encode(s)[0]
            if np.ptp(x) == 0:
                return 0.5
            return float(roc_auc_score(y_codes, x))
        codes = _bins(s)
        if np.ptp(codes) == 0:
            return 0.5  # a constant feature ranks nothing
        onehot = np.eye(n_classes)[y_codes]
        enc = _oof_encoding(codes, onehot, folds)
        if n_classes == 2:
            return float(roc_auc_score(y_codes, enc[:, 1]))
        enc = enc / np.clip(enc.sum(axis=1, keepdims=True), 1e-12, None)
        return float(roc_auc_score(y_codes, enc, multi_class="ovr", average="macro",
                                   labels=np.arange(n_classes)))
    assert y_num is not None
    if np.ptp(y_num) == 0:
        return float("nan")
    if _is_numeric(s) or _is_datetime(s):
        x = _encode(s)[0]
        if np.ptp(x) == 0:
            return 0.0
        return float(np.corrcoef(x, y_num)[0, 1] ** 2)
    codes = _bins(s)
    if np.ptp(codes) == 0:
        return 0.0
    enc = _oof_encoding(codes, y_num[:, None], folds)[:, 0]
    return float(r2_score(y_num, enc))


def _late_event_share(feature_time: pd.Series, label_time: pd.Series) -> float:
    ft = pd.to_datetime(pd.Series(feature_time).reset_index(drop=True), utc=True)
    lt = pd.to_datetime(pd.Series(label_time).reset_index(drop=True), utc=True)
    both = ft.notna() & lt.notna()
    if not both.any():
        return 0.0
    return float((ft[both] > lt[both]).mean())


def rank_features(
    X: pd.DataFrame,
    y: pd.Series | pd.DataFrame,
    *,
    seed: int = 0,
    max_rows: int = 50_000,
    event_times: Mapping[str, pd.Series] | None = None,
    label_time: pd.Series | None = None,
) -> pd.DataFrame:
    """Rank the features of ``X`` by relevance to ``y`` and flag constant, redundant and leaky ones.

    Args:
        X: feature frame (numeric, boolean, datetime and categorical/string columns).
        y: the label, a Series or a one-column DataFrame aligned by position with ``X``.
        seed: seed of the row sample, the fold assignment and the MI estimator.
        max_rows: rows sampled (without replacement) when ``X`` is larger.
        event_times: per feature, the event time of the value each row holds (aligned with ``X``).
        label_time: the label's event time per row; needed with ``event_times``.

    Returns:
        One row per feature with columns ``feature``, ``mutual_information``, ``rank`` (1 = most
        informative; ties broken by column order), ``near_constant``, ``redundant_with`` (list of
        names), ``single_feature_auc`` (AUC, or R² for regression), ``likely_leak`` and
        ``leak_reason``, sorted by rank. ``attrs`` holds ``task``, ``single_feature_metric`` and
        ``rows_used``.
    """
    X, label = _checked_inputs(X, y, seed, max_rows)
    features = list(X.columns)
    late = _late_shares(features, len(X), event_times, label_time)
    rng = np.random.default_rng(seed)
    rows = _sample_rows(label, max_rows, rng)
    Xs = X.iloc[rows].reset_index(drop=True)
    ys = label.iloc[rows].reset_index(drop=True)
    classification = _is_classification(ys)
    folds = rng.permutation(len(rows)) % _FOLDS
    if classification:
        y_codes, _ = pd.factorize(ys.astype(object), sort=False)
        y_codes, y_num = y_codes.astype(np.int64), None
    else:
        y_codes, y_num = None, ys.to_numpy(dtype="float64")
    encoded: dict[str, np.ndarray] = {}
    discrete: dict[str, bool] = {}
    for c in features:
        encoded[c], discrete[c] = _encode(Xs[c])
    mi = _mutual_information(Xs, features, encoded, discrete, y_codes, y_num, folds, seed)
    redundant = _redundancy(Xs, [c for c in features if _is_numeric(Xs[c])])
    records = []
    for c in features:
        score = _single_feature_score(Xs[c], y_codes, y_num, folds)
        reasons = _leak_reasons(score, classification, late.get(c, 0.0))
        records.append({
            "feature": c,
            "mutual_information": mi[c],
            "near_constant": _near_constant(Xs[c], encoded[c], discrete[c]),
            "redundant_with": redundant.get(c, []),
            "single_feature_auc": score,
            "likely_leak": bool(reasons),
            "leak_reason": "; ".join(reasons),
        })
    table = _ranked(pd.DataFrame.from_records(records), len(features))
    table.attrs.update(task="classification" if classification else "regression",
                       single_feature_metric="auc" if classification else "r2",
                       rows_used=int(len(rows)))
    return table


def _checked_inputs(X: Any, y: Any, seed: Any, max_rows: Any) -> tuple[pd.DataFrame, pd.Series]:
    """``X`` re-indexed with string column names, and the label as a Series; or an error."""
    if not isinstance(X, pd.DataFrame):
        raise InvalidArgumentError(f"X must be a pandas DataFrame. Got {type(X).__name__} instead.")
    if X.shape[1] == 0:
        raise InvalidArgumentError("X must have at least one feature column. Got none instead.")
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 10:
        raise InvalidArgumentError(f"max_rows must be an integer of at least 10. Got {max_rows!r} instead.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgumentError(f"seed must be a non-negative integer. Got {seed!r} instead.")
    label = _label(y, len(X))
    X = X.reset_index(drop=True)
    features = [str(c) for c in X.columns]
    dupes = sorted({c for c in features if features.count(c) > 1})
    if dupes:
        raise InvalidArgumentError(
            f"X must have unique column names. Got duplicates {dupes} instead. Rename them."
        )
    X.columns = features
    return X, label


def _late_shares(features: list[str], n: int, event_times: Mapping[str, pd.Series] | None,
                 label_time: pd.Series | None) -> dict[str, float]:
    """Per feature with an event time: the share of rows observed after the label."""
    late: dict[str, float] = {}
    if not event_times:
        return late
    if label_time is None:
        raise InvalidArgumentError(
            "event_times needs label_time, the label's event time per row, to detect features "
            "observed after the label. Got label_time=None instead."
        )
    for name, times in event_times.items():
        if name not in features:
            raise SchemaMismatchError(
                f"event_times names feature '{name}', which is not a column of X (columns: "
                f"{', '.join(features)}).{did_you_mean(str(name), features)}"
            )
        if len(times) != n or len(label_time) != n:
            raise InvalidArgumentError(
                f"event_times['{name}'] and label_time must have one value per row of X ({n}). "
                f"Got {len(times)} and {len(label_time)} instead."
            )
        late[name] = _late_event_share(times, label_time)
    return late


def _sample_rows(label: pd.Series, max_rows: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of at most ``max_rows`` rows with a label, sorted (seeded)."""
    rows = np.flatnonzero(label.notna().to_numpy())
    if len(rows) > max_rows:
        rows = np.sort(rng.choice(rows, size=max_rows, replace=False))
    if len(rows) < 10:
        raise InvalidArgumentError(
            f"rank_features needs at least 10 rows with a non-null label. Got {len(rows)} instead."
        )
    return rows


def _leak_reasons(score: float, classification: bool, late_share: float) -> list[str]:
    """Why a feature looks like a leak: it alone predicts the label, or it is observed late."""
    reasons: list[str] = []
    if not np.isnan(score):
        if classification and (score >= LEAK_AUC or score <= 1 - LEAK_AUC):
            reasons.append(f"alone predicts the label (AUC {score:.3f})")
        elif not classification and score >= LEAK_R2:
            reasons.append(f"alone predicts the label (R² {score:.3f})")
    if late_share > LATE_EVENT_SHARE:
        reasons.append(f"event time after the label's ({late_share:.0%} of rows)")
    return reasons


def _ranked(table: pd.DataFrame, n_features: int) -> pd.DataFrame:
    """Rows sorted by mutual information (ties: column order) with a 1-based ``rank``."""
    order = np.lexsort((np.arange(n_features), -table["mutual_information"].to_numpy()))
    table["rank"] = 0
    table.loc[order, "rank"] = np.arange(1, n_features + 1)
    table = table.iloc[order][COLUMNS].reset_index(drop=True)
    table["rank"] = table["rank"].astype("int64")
    return table


def selection_report(table: pd.DataFrame) -> str:
    """A plain-text table of :func:`rank_features` output, with a one-line summary of the flags."""
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise InvalidArgumentError(
            f"table must be the output of rank_features(). Got columns without {missing} instead."
        )
    metric = "R2" if table.attrs.get("single_feature_metric") == "r2" else "AUC"
    header = ["rank", "feature", "MI", metric, "flags"]
    rows: list[list[str]] = []
    for r in table.itertuples(index=False):
        flags = []
        if r.near_constant:
            flags.append("near-constant")
        if len(r.redundant_with):
            flags.append("redundant with " + ", ".join(r.redundant_with))
        if r.likely_leak:
            flags.append("LEAK: " + r.leak_reason)
        score = "-" if pd.isna(r.single_feature_auc) else f"{r.single_feature_auc:.3f}"
        rows.append([str(r.rank), str(r.feature), f"{r.mutual_information:.4f}", score,
                     "; ".join(flags) or "ok"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    n_leak = int(table["likely_leak"].sum())
    n_const = int(table["near_constant"].sum())
    n_red = int(sum(bool(len(v)) for v in table["redundant_with"]))
    task = table.attrs.get("task", "unknown task")
    lines.append("")
    lines.append(
        f"{len(table)} features ({task}): {n_leak} likely leak(s), {n_const} near-constant, "
        f"{n_red} redundant."
    )
    return "\n".join(lines)
