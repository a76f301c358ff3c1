"""Bias tests on helper-column slices.

The evaluation rows are grouped by each *training helper column* of the feature view (``sex``,
``race``, an age column banded with :func:`age_bands`, ...) and by *intersections* of two
columns (``sex×race``). Helper columns are never model features; they exist only so the model
can be judged on these slices.

Per slice we report size, positives, negatives, base rate, selection rate, TPR, FPR, precision
and AUC; the three rates carry exact (Clopper–Pearson) 95% intervals from their counts, which
stay honest on a slice with three positives where a bootstrap collapses to one value. Per
column we report the disparity figures of :mod:`validation.fairness` (demographic parity
difference, disparate impact ratio, equal opportunity and equalized odds differences, AUC gap)
over the *judged* slices and over *all groups*, each with a bootstrap interval. Limits and
verdicts are not set here: the acceptance gates are their one source.

A slice is judged only when it has at least ``min_slice_size`` rows, ``min_positives`` positive
and ``min_negatives`` negative rows; every slice says why it was or was not judged
(``judging``, e.g. ``"skipped: 3 positives < 10"``), and a slice that is not judged is left out
of the judged figures, never out of the all-groups ones.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError, did_you_mean, listing
from validation import fairness
from validation.fairness import ALL_GROUPS, DISPARITY_FIGURES, FIGURE_RATE, HIGHER_IS_FAIRER
from validation.metrics import (
    _as_binary_labels,
    _as_float,
    _check_lengths,
    clopper_pearson_interval,
    roc_auc,
)

MISSING_LABEL = "(missing)"
#: How the slice rates' intervals are computed (shown on the scorecard).
RATE_INTERVALS = "Clopper–Pearson exact 95% intervals from the slice's counts"

INTERSECTION = "×"


def _fmt_edge(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def age_bands(series: pd.Series | Sequence[float], edges: Sequence[float]) -> pd.Series:
    """Band a numeric column into half-open intervals labelled for a reader.

    ``edges=[25, 45, 65]`` gives ``"<25"``, ``"25-44"``, ``"45-64"``, ``">=65"``: each band is
    half-open, 25 ≤ age < 45. The inclusive ``"25-44"`` form is used only when the edges and
    every value are whole numbers; otherwise bands read ``"[25, 45)"``. Missing values become
    ``"(missing)"``. Edges must be strictly increasing.

    Returns:
        A string Series aligned with ``series``.
    """
    edges = [float(e) for e in edges]
    if not edges:
        raise InvalidArgumentError("edges must hold at least one value. Got [] instead.")
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise InvalidArgumentError(f"edges must be strictly increasing. Got {edges!r} instead.")
    s = pd.Series(series)
    values = pd.to_numeric(s, errors="coerce")
    finite = values.dropna().to_numpy(dtype=float)
    integer_edges = all(e.is_integer() for e in edges) and bool(
        np.all(np.mod(finite, 1.0) == 0.0)
    )
    labels = [f"<{_fmt_edge(edges[0])}"]
    for lo, hi in zip(edges, edges[1:]):
        if integer_edges:
            labels.append(f"{_fmt_edge(lo)}-{_fmt_edge(hi - 1)}")
        else:
            labels.append(f"[{_fmt_edge(lo)}, {_fmt_edge(hi)})")
    labels.append(f">={_fmt_edge(edges[-1])}")
    idx = np.searchsorted(np.asarray(edges), values.to_numpy(dtype=float), side="right")
    out = np.array([labels[i] for i in idx], dtype=object)
    out[values.isna().to_numpy()] = MISSING_LABEL
    return pd.Series(out, index=s.index, name=s.name)


@dataclass(frozen=True)
class SliceMetrics:
    """Metrics of the model on one slice (one value of one helper column)."""

    column: str
    value: str
    size: int
    positives: int
    base_rate: float
    selection_rate: float
    tpr: float | None
    fpr: float | None
    precision: float | None
    auc: float | None
    judged: bool
    note: str = ""
    negatives: int | None = None
    intervals: Mapping[str, Any] = field(default_factory=dict)  # rate → [lower, upper]
    judging: str = ""  # why it was or was not judged, against the minimums

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        d = asdict(self)
        d["intervals"] = dict(self.intervals)
        return d


@dataclass(frozen=True)
class Disparity:
    """Disparity figures of one helper column, over its judged slices and over all groups.

    ``extremes`` maps each figure to ``[slice with max, slice with min]``; a figure is ``None``
    (its reason in ``notes``) when fewer than two judged slices have a value for it.
    ``all_groups`` holds the same figures over every slice with a row (``all_groups_extremes``,
    ``all_groups_intervals`` alike); ``intervals`` are the judged figures' bootstrap intervals.
    """

    column: str
    demographic_parity_difference: float | None
    equal_opportunity_difference: float | None
    auc_gap: float | None
    judged_slices: tuple[str, ...]
    excluded_slices: tuple[str, ...]
    extremes: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)
    disparate_impact_ratio: float | None = None
    equalized_odds_difference: float | None = None
    intervals: Mapping[str, Any] = field(default_factory=dict)  # figure → [lower, upper]
    all_groups: Mapping[str, float | None] = field(default_factory=dict)
    all_groups_extremes: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    all_groups_intervals: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        d = asdict(self)
        d["judged_slices"] = list(self.judged_slices)
        d["excluded_slices"] = list(self.excluded_slices)
        d["extremes"] = {k: list(v) for k, v in self.extremes.items()}
        d["all_groups_extremes"] = {k: list(v) for k, v in self.all_groups_extremes.items()}
        d["notes"] = dict(self.notes)
        d["intervals"] = dict(self.intervals)
        d["all_groups"] = dict(self.all_groups)
        d["all_groups_intervals"] = dict(self.all_groups_intervals)
        return d


@dataclass(frozen=True)
class BiasReport:
    """Slice metrics and disparities for every helper column."""

    min_slice_size: int
    slices: tuple[SliceMetrics, ...]
    disparities: tuple[Disparity, ...]
    rule: JudgingRule | None = None

    def figures(self) -> dict[str, float | None]:
        """Flat figures for acceptance gates.

        Each figure is its worst value over the helper columns (the maximum of a difference,
        the minimum of ``disparate_impact_ratio``; ``None`` when no column has it) over their
        judged slices; ``<figure>_all_groups`` is the same over all groups;
        ``<figure>[<column>]`` is the per-column value; ``max_abs_dp_difference`` is the worst
        demographic parity difference over judged slices.
        """
        out: dict[str, float | None] = {}
        for fig in DISPARITY_FIGURES:
            worst = min if fig in HIGHER_IS_FAIRER else max
            for name, value_of in (
                (fig, lambda d, f=fig: getattr(d, f)),
                (fig + ALL_GROUPS, lambda d, f=fig: d.all_groups.get(f)),
            ):
                vals = [value_of(d) for d in self.disparities if value_of(d) is not None]
                out[name] = worst(vals) if vals else None
                for d in self.disparities:
                    out[f"{name}[{d.column}]"] = value_of(d)
        out["max_abs_dp_difference"] = out["demographic_parity_difference"]
        return out

    def slices_for(self, column: str) -> list[SliceMetrics]:
        """The slices of one helper column, in report order."""
        return [s for s in self.slices if s.column == column]

    @property
    def columns(self) -> list[str]:
        """Helper columns in report order."""
        return [d.column for d in self.disparities]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (``from_dict`` reads it back)."""
        rule = self.rule or JudgingRule(self.min_slice_size, 0, 0)
        return {
            "min_slice_size": self.min_slice_size,
            "min_positives": rule.min_positives,
            "min_negatives": rule.min_negatives,
            "rate_intervals": RATE_INTERVALS,
            "figure_intervals": fairness.BOOTSTRAP_METHOD,
            "slices": [s.to_dict() for s in self.slices],
            "disparities": [d.to_dict() for d in self.disparities],
            "figures": self.figures(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BiasReport:
        """Rebuild a report from :meth:`to_dict` output."""
        slices = tuple(SliceMetrics(**s) for s in data["slices"])
        disparities = tuple(
            Disparity(
                column=d["column"],
                demographic_parity_difference=d["demographic_parity_difference"],
                equal_opportunity_difference=d["equal_opportunity_difference"],
                auc_gap=d["auc_gap"],
                judged_slices=tuple(d["judged_slices"]),
                excluded_slices=tuple(d["excluded_slices"]),
                extremes={k: (v[0], v[1]) for k, v in d.get("extremes", {}).items()},
                notes=dict(d.get("notes", {})),
                disparate_impact_ratio=d.get("disparate_impact_ratio"),
                equalized_odds_difference=d.get("equalized_odds_difference"),
                intervals=dict(d.get("intervals", {})),
                all_groups=dict(d.get("all_groups", {})),
                all_groups_extremes={k: (v[0], v[1])
                                     for k, v in d.get("all_groups_extremes", {}).items()},
                all_groups_intervals=dict(d.get("all_groups_intervals", {})),
            )
            for d in data["disparities"]
        )
        rule = JudgingRule(int(data["min_slice_size"]), int(data.get("min_positives", 0)),
                           int(data.get("min_negatives", 0)))
        return cls(int(data["min_slice_size"]), slices, disparities, rule)


def _slice_label(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return MISSING_LABEL
    return str(value)


@dataclass(frozen=True)
class JudgingRule:
    """The least rows, positive rows and negative rows a slice needs to be judged."""

    min_size: int = 30
    min_positives: int = 10
    min_negatives: int = 10

    def _checks(self, n: int, pos: int, neg: int) -> list[tuple[int, int, str]]:
        return [(n, self.min_size, "rows"), (pos, self.min_positives, "positives"),
                (neg, self.min_negatives, "negatives")]

    def reasons(self, n: int, pos: int, neg: int) -> list[str]:
        """Why a slice is not judged (empty when it is), e.g. ``["3 positives < 10"]``."""
        return [f"{have} {what} < {need}" for have, need, what in self._checks(n, pos, neg)
                if have < need]

    def judging(self, n: int, pos: int, neg: int) -> str:
        """Why a slice was or was not judged, against every minimum:
        ``"judged: 93 rows >= 30, 12 positives >= 10, 81 negatives >= 10"`` or
        ``"skipped: 3 positives < 10"``."""
        reasons = self.reasons(n, pos, neg)
        if reasons:
            return "skipped: " + ", ".join(reasons)
        return "judged: " + ", ".join(f"{have} {what} >= {need}"
                                      for have, need, what in self._checks(n, pos, neg))


def _slice(column: str, value: str, y: np.ndarray, s: np.ndarray, p: np.ndarray,
           rule: JudgingRule) -> SliceMetrics:
    n = len(y)
    pos = int(y.sum())
    neg = n - pos
    tp = int(np.sum((p == 1) & (y == 1)))
    fp = int(np.sum((p == 1) & (y == 0)))
    reasons = rule.reasons(n, pos, neg)
    notes = []
    if pos == 0:
        notes.append("no positive rows: TPR undefined")
    if neg == 0:
        notes.append("no negative rows: FPR undefined")
    auc = roc_auc(y, s)
    if auc is None:
        notes.append("single class: AUC undefined" if not (pos and neg) else "AUC undefined")
    return SliceMetrics(
        column=column, value=value, size=n, positives=pos, base_rate=pos / n,
        selection_rate=float(p.mean()), tpr=tp / pos if pos else None,
        fpr=fp / neg if neg else None, precision=tp / (tp + fp) if (tp + fp) else None,
        auc=auc, judged=not reasons, note="; ".join(notes), negatives=neg,
        intervals={"selection_rate": clopper_pearson_interval(int(p.sum()), n),
                   "tpr": clopper_pearson_interval(tp, pos),
                   "fpr": clopper_pearson_interval(fp, neg)},
        judging=rule.judging(n, pos, neg),
    )


def _extremes(slices: Sequence[SliceMetrics], which: str = "judged"
              ) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Which slices hold the max and min of each figure's rate, or why a figure is missing."""
    extremes, notes = {}, {}
    for fig, attr in FIGURE_RATE.items():
        vals = [(getattr(s, attr), s.value) for s in slices if getattr(s, attr) is not None]
        if len(vals) >= 2:
            extremes[fig] = (max(vals)[1], min(vals)[1])
        else:
            notes[fig] = f"fewer than two {which} slices with a defined {attr}"
    return extremes, notes


def _figures_of(slices: Sequence[SliceMetrics]) -> dict[str, float | None]:
    rates = {r: [getattr(sl, r) for sl in slices] for r in fairness.RATES}
    return fairness.figures(rates, [sl.auc for sl in slices])


def _labels(helpers: pd.DataFrame, col: str, bands: Mapping[str, Sequence[float]]
            ) -> tuple[np.ndarray, list[str]]:
    """Slice label of every row and the slices in report order (bands ascending, missing
    last; an intersection ``a×b`` combines both columns' labels)."""
    if INTERSECTION in col:
        parts = [_labels(helpers, c, bands) for c in col.split(INTERSECTION)]
        labels = np.array([" × ".join(t) for t in zip(*(lab for lab, _ in parts))], dtype=object)
        rank = {v: i for i, v in enumerate(
            " × ".join(t) for t in itertools.product(*(o for _, o in parts)))}
        return labels, sorted(pd.unique(labels), key=lambda v: rank.get(v, len(rank)))
    raw = helpers[col].reset_index(drop=True)
    labels = (age_bands(raw, bands[col]) if col in bands else raw.map(_slice_label))
    labels = labels.astype(str).to_numpy()
    order = list(pd.unique(labels))
    if col not in bands:
        return labels, sorted(order)
    numeric = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    return labels, sorted(order, key=lambda lab: (
        lab == MISSING_LABEL,
        np.nanmin(numeric[labels == lab]) if lab != MISSING_LABEL else 0.0))


def _column(col: str, labels: np.ndarray, order: Sequence[str], y: np.ndarray, s: np.ndarray,
            p: np.ndarray, rule: JudgingRule, n_resamples: int, seed: int
            ) -> tuple[list[SliceMetrics], Disparity]:
    """The slices of one column (with exact rate intervals) and its disparities."""
    slices = [_slice(col, v, y[labels == v], s[labels == v], p[labels == v], rule)
              for v in order]
    index = {v: i for i, v in enumerate(order)}
    codes = np.fromiter((index[v] for v in labels), dtype=np.int64, count=len(labels))
    judged_idx = [i for i, sl in enumerate(slices) if sl.judged]
    boot = fairness.bootstrap(codes, judged_idx, y, p, s, n_resamples=n_resamples, seed=seed)
    judged = [slices[i] for i in judged_idx]
    extremes, notes = _extremes(judged)
    all_extremes, _ = _extremes(slices, "")
    return slices, Disparity(
        column=col, judged_slices=tuple(sl.value for sl in judged),
        excluded_slices=tuple(sl.value for sl in slices if not sl.judged),
        extremes=extremes, notes=notes, intervals=boot["judged"],
        all_groups=_figures_of(slices), all_groups_extremes=all_extremes,
        all_groups_intervals=boot["all_groups"], **_figures_of(judged),
    )


def slice_report(
    y_true: Any,
    y_score: Any,
    y_pred: Any,
    helpers: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    min_slice_size: int = 30,
    min_positives: int = 0,
    min_negatives: int = 0,
    bands: Mapping[str, Sequence[float]] | None = None,
    intersections: Sequence[tuple[str, str]] = (),
    n_resamples: int = 200,
    seed: int = 0,
) -> BiasReport:
    """Evaluate the model on every slice of every helper column and intersection.

    Args:
        y_true: evaluation labels (0/1).
        y_score: scores for the positive class (for slice AUC).
        y_pred: 0/1 predictions at the chosen threshold (for selection rate, TPR, FPR, precision).
        helpers: the training helper columns of the same rows, in the same order (the index is
            ignored; rows are matched by position).
        columns: helper columns to slice by (default: every column of ``helpers``).
        min_slice_size, min_positives, min_negatives: a slice with fewer rows, positive rows or
            negative rows is reported with ``judged=False`` (and why) and left out of the
            disparity figures.
        bands: ``{column: edges}`` for numeric columns to band with :func:`age_bands` first.
        intersections: pairs of helper columns to slice by together (e.g. ``("sex", "race")``).
        n_resamples, seed: the bootstrap of the disparity figures (the slice rates' intervals
            are exact, from their counts).

    Returns:
        A :class:`BiasReport`.
    """
    y = _as_binary_labels(y_true)
    s = _as_float(y_score, "y_score")
    p = _as_binary_labels(y_pred, "y_pred")
    if not isinstance(helpers, pd.DataFrame):
        raise InvalidArgumentError(
            f"helpers must be a pandas DataFrame of helper columns. Got {type(helpers).__name__}."
        )
    _check_lengths(y_true=y, y_score=s, y_pred=p, helpers=np.empty(len(helpers)))
    if min_slice_size < 1 or min_positives < 0 or min_negatives < 0:
        raise InvalidArgumentError(
            f"min_slice_size must be >= 1 and min_positives/min_negatives >= 0. Got "
            f"{min_slice_size!r}, {min_positives!r}, {min_negatives!r}.")
    cols = list(helpers.columns) if columns is None else list(columns)
    bands = dict(bands or {})
    for c in [*cols, *bands, *(c for pair in intersections for c in pair)]:
        if c not in helpers.columns:
            raise InvalidArgumentError(
                f"Helper column {c!r} is not in the evaluation data.{did_you_mean(c, helpers.columns)}"
                f" Available helper columns: {listing(helpers.columns)}."
            )
    rule = JudgingRule(min_slice_size, min_positives, min_negatives)
    slices: list[SliceMetrics] = []
    disparities: list[Disparity] = []
    for col in [*cols, *(INTERSECTION.join(pair) for pair in intersections)]:
        labels, order = _labels(helpers, col, bands)
        col_slices, disparity = _column(col, labels, order, y, s, p, rule, n_resamples, seed)
        slices.extend(col_slices)
        disparities.append(disparity)
    return BiasReport(min_slice_size, tuple(slices), tuple(disparities), rule)
