"""Bias tests on helper-column slices.

The evaluation rows are grouped by each *training helper column* of the feature view (``sex``,
``race``, an age column banded with :func:`age_bands`, ...). Helper columns are never model
features; they exist only so the model can be judged on these slices.

Per slice we report size, base rate, selection rate, TPR, FPR, precision and AUC. Per helper
column we report three disparity figures over the *judged* slices:

* demographic parity difference = max − min selection rate;
* equal opportunity difference  = max − min TPR (slices without positive rows have no TPR and are
  left out of this figure only);
* AUC gap                       = max − min slice AUC (slices holding a single class have no AUC).

A slice smaller than ``min_slice_size`` is still reported, with ``judged=False``, but is excluded
from every disparity figure: its rates are too noisy to judge the model by.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError, did_you_mean, listing
from validation.metrics import _as_binary_labels, _as_float, _check_lengths, roc_auc

MISSING_LABEL = "(missing)"

#: The disparity figures computed per helper column, as named in gates and reports.
DISPARITY_FIGURES: tuple[str, ...] = (
    "demographic_parity_difference", "equal_opportunity_difference", "auc_gap",
)


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

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return asdict(self)


@dataclass(frozen=True)
class Disparity:
    """Disparity figures of one helper column, over its judged slices.

    ``extremes`` maps each figure to ``[slice with max, slice with min]``; a figure is ``None``
    (its reason in ``notes``) when fewer than two judged slices have a value for it.
    """

    column: str
    demographic_parity_difference: float | None
    equal_opportunity_difference: float | None
    auc_gap: float | None
    judged_slices: tuple[str, ...]
    excluded_slices: tuple[str, ...]
    extremes: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        d = asdict(self)
        d["judged_slices"] = list(self.judged_slices)
        d["excluded_slices"] = list(self.excluded_slices)
        d["extremes"] = {k: list(v) for k, v in self.extremes.items()}
        d["notes"] = dict(self.notes)
        return d


@dataclass(frozen=True)
class BiasReport:
    """Slice metrics and disparities for every helper column."""

    min_slice_size: int
    slices: tuple[SliceMetrics, ...]
    disparities: tuple[Disparity, ...]

    def figures(self) -> dict[str, float | None]:
        """Flat figures for acceptance gates.

        ``max_abs_dp_difference`` / ``demographic_parity_difference``,
        ``equal_opportunity_difference`` and ``auc_gap`` are the maxima over helper columns
        (``None`` when no column has the figure); ``<figure>[<column>]`` is the per-column value.
        """
        out: dict[str, float | None] = {}
        for fig in DISPARITY_FIGURES:
            vals = [getattr(d, fig) for d in self.disparities if getattr(d, fig) is not None]
            out[fig] = max(vals) if vals else None
            for d in self.disparities:
                out[f"{fig}[{d.column}]"] = getattr(d, fig)
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
        return {
            "min_slice_size": self.min_slice_size,
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
            )
            for d in data["disparities"]
        )
        return cls(int(data["min_slice_size"]), slices, disparities)


def _slice_label(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return MISSING_LABEL
    return str(value)


def _slice(column: str, value: str, y: np.ndarray, s: np.ndarray, p: np.ndarray,
           min_size: int) -> SliceMetrics:
    n = len(y)
    pos = int(y.sum())
    neg = n - pos
    tp = int(np.sum((p == 1) & (y == 1)))
    fp = int(np.sum((p == 1) & (y == 0)))
    notes = []
    judged = n >= min_size
    if not judged:
        notes.append(f"not judged: {n} rows < min_slice_size {min_size}")
    if pos == 0:
        notes.append("no positive rows: TPR undefined")
    if neg == 0:
        notes.append("no negative rows: FPR undefined")
    auc = roc_auc(y, s)
    if auc is None and pos and neg:
        notes.append("AUC undefined")
    elif auc is None:
        notes.append("single class: AUC undefined")
    return SliceMetrics(
        column=column,
        value=value,
        size=n,
        positives=pos,
        base_rate=pos / n,
        selection_rate=float(p.mean()),
        tpr=tp / pos if pos else None,
        fpr=fp / neg if neg else None,
        precision=tp / (tp + fp) if (tp + fp) else None,
        auc=auc,
        judged=judged,
        note="; ".join(notes),
    )


def _spread(slices: Iterable[SliceMetrics], attr: str) -> tuple[float | None, tuple[str, str] | None]:
    vals = [(getattr(s, attr), s.value) for s in slices if getattr(s, attr) is not None]
    if len(vals) < 2:
        return None, None
    hi = max(vals, key=lambda v: v[0])
    lo = min(vals, key=lambda v: v[0])
    return float(hi[0] - lo[0]), (hi[1], lo[1])


def slice_report(
    y_true: Any,
    y_score: Any,
    y_pred: Any,
    helpers: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    min_slice_size: int = 30,
    bands: Mapping[str, Sequence[float]] | None = None,
) -> BiasReport:
    """Evaluate the model on every slice of every helper column.

    Args:
        y_true: evaluation labels (0/1).
        y_score: scores for the positive class (for slice AUC).
        y_pred: 0/1 predictions at the chosen threshold (for selection rate, TPR, FPR, precision).
        helpers: the training helper columns of the same rows, in the same order (the index is
            ignored; rows are matched by position).
        columns: helper columns to slice by (default: every column of ``helpers``).
        min_slice_size: slices with fewer rows are reported with ``judged=False`` and left out
            of the disparity figures.
        bands: ``{column: edges}`` for numeric columns to band with :func:`age_bands` first.

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
    if min_slice_size < 1:
        raise InvalidArgumentError(f"min_slice_size must be >= 1. Got {min_slice_size!r}.")
    cols = list(helpers.columns) if columns is None else list(columns)
    bands = dict(bands or {})
    for c in [*cols, *bands]:
        if c not in helpers.columns:
            raise InvalidArgumentError(
                f"Helper column {c!r} is not in the evaluation data.{did_you_mean(c, helpers.columns)}"
                f" Available helper columns: {listing(helpers.columns)}."
            )
    slices: list[SliceMetrics] = []
    disparities: list[Disparity] = []
    for col in cols:
        raw = helpers[col].reset_index(drop=True)
        labels = age_bands(raw, bands[col]) if col in bands else raw.map(_slice_label)
        labels = labels.astype(str).to_numpy()
        order = pd.unique(labels)
        if col in bands:  # bands in ascending order of value, missing last
            numeric = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
            order = sorted(order, key=lambda lab: (
                lab == MISSING_LABEL,
                np.nanmin(numeric[labels == lab]) if lab != MISSING_LABEL else 0.0,
            ))
        else:
            order = sorted(order)
        col_slices = []
        for value in order:
            mask = labels == value
            col_slices.append(_slice(col, value, y[mask], s[mask], p[mask], min_slice_size))
        slices.extend(col_slices)
        judged = [sl for sl in col_slices if sl.judged]
        extremes: dict[str, tuple[str, str]] = {}
        notes: dict[str, str] = {}
        figs: dict[str, float | None] = {}
        for fig, attr in zip(DISPARITY_FIGURES, ("selection_rate", "tpr", "auc")):
            value, ext = _spread(judged, attr)
            figs[fig] = value
            if ext is not None:
                extremes[fig] = ext
            else:
                notes[fig] = (
                    f"fewer than two judged slices (size >= {min_slice_size}) with a defined "
                    f"{attr}"
                )
        disparities.append(Disparity(
            column=col,
            demographic_parity_difference=figs["demographic_parity_difference"],
            equal_opportunity_difference=figs["equal_opportunity_difference"],
            auc_gap=figs["auc_gap"],
            judged_slices=tuple(sl.value for sl in judged),
            excluded_slices=tuple(sl.value for sl in col_slices if not sl.judged),
            extremes=extremes,
            notes=notes,
        ))
    return BiasReport(min_slice_size, tuple(slices), tuple(disparities))

