"""Disparity figures between slices and their bootstrap intervals (used by :mod:`validation.bias`).

Over the slices of one helper column:

* demographic parity difference  = max − min selection rate;
* disparate impact ratio         = min / max selection rate (the four-fifths rule asks ≥ 0.8);
* equal opportunity difference   = max − min true-positive rate;
* equalized odds difference      = the larger of the TPR range and the FPR range;
* AUC gap                        = max − min slice AUC.

Each figure is computed twice: over the *judged* slices (those with enough rows, positives and
negatives to be read) and over *all groups* (every slice with a row, as Fairlearn's
``demographic_parity_difference`` counts them; a rate that is undefined in a group, a TPR with
no positives, leaves that group out of that figure). Leaving small groups out can hide the
worst one, so a reviewer sees both; a gate names which it uses (``<figure>`` or
``max_abs_dp_difference``: judged slices; ``<figure>_all_groups``: all groups).

Intervals are percentile bootstrap intervals: the evaluation rows are resampled with
replacement (``numpy.random.default_rng(seed)``), and the slice rates, AUCs and figures are
recomputed on every resample with the same slices judged. There is no verdict here: the
acceptance gates are the one source of limits (:mod:`validation.verdicts` reads them).
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
#: The suffix of a figure computed over every group rather than the judged slices.
ALL_GROUPS = "_all_groups"
#: The same figures over every group (gate names).
ALL_GROUPS_FIGURES: tuple[str, ...] = tuple(f + ALL_GROUPS for f in DISPARITY_FIGURES)
#: Figures where higher is fairer (the others: lower is fairer).
HIGHER_IS_FAIRER = frozenset({"disparate_impact_ratio",
                              "disparate_impact_ratio" + ALL_GROUPS})
RATES = ("selection_rate", "tpr", "fpr")
#: Which slice attribute each figure spreads.
FIGURE_RATE: dict[str, str] = {
    "demographic_parity_difference": "selection_rate", "disparate_impact_ratio": "selection_rate",
    "equal_opportunity_difference": "tpr", "equalized_odds_difference": "tpr", "auc_gap": "auc",
}
BOOTSTRAP_METHOD = "percentile bootstrap over evaluation rows"


def split_figure(metric: str) -> tuple[str, str | None, str] | None:
    """``(figure, column or None, basis)`` of a gate metric key such as
    ``max_abs_dp_difference``, ``disparate_impact_ratio[sex]`` or
    ``demographic_parity_difference_all_groups[sex×race]``; basis is ``"judged slices"`` or
    ``"all groups"``; None for a metric that is no disparity figure."""
    name, column = metric, None
    if metric.endswith("]") and "[" in metric:
        name, _, rest = metric.partition("[")
        column = rest[:-1]
    basis = "judged slices"
    if name.endswith(ALL_GROUPS):
        name, basis = name[: -len(ALL_GROUPS)], "all groups"
    if name == "max_abs_dp_difference":
        name = "demographic_parity_difference"
    return (name, column, basis) if name in DISPARITY_FIGURES else None


def _spread(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    return float(max(vals) - min(vals)) if len(vals) >= 2 else None


def figures(rates: Mapping[str, Sequence[float | None]], aucs: Sequence[float | None]
            ) -> dict[str, float | None]:
    """Every disparity figure from the slices' rates (``selection_rate``, ``tpr``, ``fpr``
    lists, one value per slice, None where undefined) and AUCs."""
    sel = [v for v in rates["selection_rate"] if v is not None and np.isfinite(v)]
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


def _aucs(codes: np.ndarray, y: np.ndarray, s: np.ndarray, k: int) -> np.ndarray:
    """Per-code ROC AUC (Mann–Whitney, ties count one half; NaN with a single class), every
    group at once: rows sorted by (code, score), tied runs given their mean rank."""
    n = len(codes)
    if n == 0:
        return np.full(k, np.nan)
    order = np.lexsort((s, codes))
    c, sc, yy = codes[order], s[order], y[order]
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (c[1:] != c[:-1]) | (sc[1:] != sc[:-1])
    run = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], n)
    mean_position = (starts + ends - 1) / 2.0  # 0-based mean position of each tied run
    group_start = np.searchsorted(c, np.arange(k))
    ranks = mean_position[run] - group_start[c] + 1.0
    n_pos = np.bincount(c, weights=yy, minlength=k)
    n_neg = np.bincount(c, minlength=k) - n_pos
    rank_sum = np.bincount(c, weights=ranks * yy, minlength=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
    return np.where((n_pos > 0) & (n_neg > 0), auc, np.nan)


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def _subset(rates: Mapping[str, np.ndarray], aucs: np.ndarray, groups: Sequence[int]
            ) -> dict[str, float | None]:
    sub = {r: [_finite(rates[r][j]) for j in groups] for r in RATES}
    return figures(sub, [_finite(aucs[j]) for j in groups])


def bootstrap(codes: np.ndarray, judged: Sequence[int], y: np.ndarray, p: np.ndarray,
              s: np.ndarray, *, n_resamples: int, seed: int, alpha: float = 0.05
              ) -> dict[str, Any]:
    """Intervals of the column's figures over the judged slices and over all groups.

    Args:
        codes: slice index (0..k-1) of every evaluation row.
        judged: the slice indices the judged figures are computed over.
        y, p, s: 0/1 labels, 0/1 predictions and scores (for the slice AUCs).

    Returns:
        ``{"judged": {figure: [lo, hi]}, "all_groups": {figure: [lo, hi]}, "n_resamples",
        "alpha", "seed", "method"}``; an interval is ``None`` with fewer than 2 finite values.
    """
    k = int(codes.max()) + 1 if len(codes) else 0
    rng = np.random.default_rng(seed)
    yf, pf = y.astype(float), p.astype(float)
    everyone = range(k)
    draws: dict[str, dict[str, list[float]]] = {
        basis: {f: [] for f in DISPARITY_FIGURES} for basis in ("judged", "all_groups")}
    for _ in range(n_resamples):
        idx = rng.integers(0, len(codes), size=len(codes))
        c = codes[idx]
        rates = _rates(c, yf[idx], pf[idx], k)
        aucs = _aucs(c, yf[idx], s[idx], k)
        for basis, groups in (("judged", judged), ("all_groups", everyone)):
            for name, value in _subset(rates, aucs, groups).items():
                if value is not None:
                    draws[basis][name].append(value)
    return {basis: {f: _interval(v, alpha) for f, v in d.items()} for basis, d in draws.items()
            } | {"n_resamples": n_resamples, "alpha": alpha, "seed": seed,
                 "method": BOOTSTRAP_METHOD}


def _interval(values: Sequence[float], alpha: float) -> list[float] | None:
    vals = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(vals) < 2:
        return None
    return [float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2))]
