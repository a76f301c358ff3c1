"""The paired bootstrap of a metric difference, and the verdict it allows.

Two models scored on the same rows are compared by resampling those rows with replacement
(``numpy.random.default_rng(seed)``, no global RNG) and computing both models' metric on every
resample: the interval of the difference then reflects only the rows, not two independent
samples. ``fstrain ablate`` (each feature group's effect) and ``registry diff`` (two versions on
their shared test rows) both judge through here, so they agree on what "no clear effect" means:
an interval that holds 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

#: ``fn(y, scores) -> value``; ``None`` or NaN where the metric is undefined (one class).
MetricFn = Callable[[np.ndarray, np.ndarray], Any]

NO_CLEAR_DIFFERENCE = "no clear difference"
UNDETERMINED = "undetermined"


def paired_delta(metric_fn: MetricFn, y: np.ndarray, reference: np.ndarray,
                 candidate: np.ndarray, *, resamples: int, seed: int,
                 alpha: float = 0.05) -> tuple[float, float, float]:
    """``(delta, lower, upper)`` of ``metric(candidate) − metric(reference)`` with a paired
    percentile bootstrap interval at level ``1 − alpha``: each resample draws the same rows for
    both. Resamples where the difference is undefined are dropped; with fewer than two left
    the bounds are NaN."""
    delta = _value(metric_fn(y, candidate)) - _value(metric_fn(y, reference))
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        idx = rng.integers(0, len(y), size=len(y))
        d = _value(metric_fn(y[idx], candidate[idx])) - _value(metric_fn(y[idx], reference[idx]))
        if np.isfinite(d):
            values.append(d)
    if len(values) < 2:
        return float(delta), float("nan"), float("nan")
    tail = 50.0 * alpha  # percent in each tail
    lower, upper = np.percentile(values, [tail, 100.0 - tail])
    return float(delta), float(lower), float(upper)


def interval_verdict(lower: float, upper: float, higher_is_better: bool) -> str:
    """``better`` or ``worse`` (candidate against reference) only when the whole interval lies
    on one side of 0; ``no clear difference`` when it holds 0; ``undetermined`` without one."""
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return UNDETERMINED
    if lower <= 0.0 <= upper:
        return NO_CLEAR_DIFFERENCE
    up = lower > 0.0
    return "better" if up == higher_is_better else "worse"


def _value(value: Any) -> float:
    return float("nan") if value is None else float(value)
