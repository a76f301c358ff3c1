"""Disparity figures between slices and their bootstrap intervals (used by :mod:`validation.bias`).

Over the *judged* slices of one helper column:

* demographic parity difference  = max − min selection rate;
* disparate impact ratio         = min / max selection rate (the four-fifths rule asks ≥ 0.8);
* equal opportunity difference   = max − min true-positive rate;
* equalized odds difference      = the larger of the TPR range and the FPR range;
* AUC gap                        = max − min slice AUC.

Intervals are percentile bootstrap intervals: the evaluation rows are resampled with
replacement (``numpy.random.default_rng(seed)``), and the slice rates and the figures are
recomputed on every resample with the same slices judged. Each disparity also gets a verdict
against a limit (:data:`DEFAULT_LIMITS`), shown next to it; the gates decide the status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: The disparity figures per helper column, as named in gates and reports.
DISPARITY_FIGURES: tuple[str, ...] = (
    "demographic_parity_difference", "disparate_impact_ratio", "equal_opportunity_difference",
    "equalized_odds_difference", "auc_gap",
)
#: Figures where higher is fairer (the others: lower is fairer).
HIGHER_IS_FAIRER = frozenset({"disparate_impact_ratio"})
#: Figure → (operator, limit) of its per-disparity verdict.
DEFAULT_LIMITS: dict[str, tuple[str, float]] = {
    "demographic_parity_difference": ("<=", 0.1),
    "disparate_impact_ratio": (">=", 0.8),
    "equal_opportunity_difference": ("<=", 0.1),
    "equalized_odds_difference": ("<=", 0.1),
    "auc_gap": ("<=", 0.1),
}
RATES = ("selection_rate", "tpr", "fpr")


def _spread(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    return float(max(vals) - min(vals)) if len(vals) >= 2 else None


def figures(rates: Mapping[str, Sequence[float | None]], aucs: Sequence[float | None]
            ) -> dict[str, float | None]:
    """Every disparity figure from the judged slices' rates (``selection_rate``, ``tpr``,
    ``fpr`` lists, one value per slice) and AUCs."""
    sel = [v for v in rates["selection_rate"] if v is not None]
    ratio = None
    if len(sel) >= 2 and max(sel) > 0:
        ratio = float(min(sel) / max(sel))
    tpr, fpr = _spread(rates["tpr"]), _spread(rates["fpr"])
    odds = None if tpr is None or fpr is None else max(tpr, fpr)
    return {"demographic_parity_difference": _spread(sel), "disparate_impact_ratio": ratio,
            "equal_opportunity_difference": tpr, "equalized_odds_difference": odds,
            "auc_gap": _spread(aucs)}


def _rates(codes: np.ndarray, y: np.ndarray, p: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Per-code selection rate, TPR and FPR (NaN where undefined)."""
    n = np.bincount(codes, minlength=k).astype(float)
    pos = np.bincount(codes, weights=y, minlength=k)
    sel = np.bincount(codes, weights=p, minlength=k)
    tp = np.bincount(codes, weights=y * p, minlength=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"selection_rate": sel / n, "tpr": tp / pos, "fpr": (sel - tp) / (n - pos)}


def bootstrap(codes: np.ndarray, judged: Sequence[int], y: np.ndarray, p: np.ndarray, *,
              n_resamples: int, seed: int, alpha: float = 0.05) -> dict[str, Any]:
    """Intervals of every slice's rates and of the column's figures (AUC gap excluded: the
    slice AUCs are not resampled).

    Args:
        codes: slice index (0..k-1) of every evaluation row.
        judged: the slice indices the figures are computed over.
        y, p: 0/1 labels and 0/1 predictions.

    Returns:
        ``{"slices": {index: {rate: [lo, hi]}}, "figures": {figure: [lo, hi]}, "n_resamples",
        "alpha", "seed", "method"}``; an interval is ``None`` with fewer than 2 finite values.
    """
    k = int(codes.max()) + 1 if len(codes) else 0
    rng = np.random.default_rng(seed)
    yf, pf = y.astype(float), p.astype(float)
    draws: dict[str, list[np.ndarray]] = {r: [] for r in RATES}
    fig_draws: dict[str, list[float]] = {f: [] for f in DISPARITY_FIGURES if f != "auc_gap"}
    for _ in range(n_resamples):
        idx = rng.integers(0, len(codes), size=len(codes))
        rates = _rates(codes[idx], yf[idx], pf[idx], k)
        for r in RATES:
            draws[r].append(rates[r])
        sub = {r: [_finite(rates[r][j]) for j in judged] for r in RATES}
        for name, value in figures(sub, []).items():
            if name in fig_draws and value is not None:
                fig_draws[name].append(value)
    slices = {j: {r: _interval([d[j] for d in draws[r]], alpha) for r in RATES}
              for j in range(k)}
    return {"slices": slices,
            "figures": {f: _interval(v, alpha) for f, v in fig_draws.items()},
            "n_resamples": n_resamples, "alpha": alpha, "seed": seed,
            "method": "percentile bootstrap over evaluation rows"}


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def _interval(values: Sequence[float], alpha: float) -> list[float] | None:
    vals = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(vals) < 2:
        return None
    return [float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2))]


def verdicts(values: Mapping[str, float | None],
             limits: Mapping[str, tuple[str, float]] = DEFAULT_LIMITS) -> dict[str, dict[str, Any]]:
    """Figure → ``{"op", "limit", "passed"}`` (``passed`` is None when the figure is
    undefined)."""
    out = {}
    for name, (op, limit) in limits.items():
        v = values.get(name)
        passed = None if v is None else (v >= limit if op == ">=" else v <= limit)
        out[name] = {"op": op, "limit": limit, "passed": passed}
    return out
