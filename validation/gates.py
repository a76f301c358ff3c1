"""Acceptance gates: the rules a model version must pass before it may be promoted.

Gates come from configuration as strings. The grammar is strict:

* ``"<metric> <op> <number>"`` with ``op`` one of ``>=``, ``<=``, ``>``, ``<``; ``metric`` is a
  known metric (see :data:`KNOWN_METRICS`), optionally qualified by a helper column for the
  bias figures: ``"demographic_parity_difference[sex] <= 0.1"``. A bias figure is computed
  over the judged slices; ``<figure>_all_groups`` is the same figure over every group
  (``"demographic_parity_difference_all_groups[sex×race] <= 0.4"``).
* ``"better_than_baseline"`` or ``"better_than_baseline(<metric>)"``: the model must be strictly
  better than the trivial baseline (majority-class prior / mean predictor) on ``<metric>``
  (default: the primary metric given to :func:`evaluate_gates`).
* ``"better_than_previous"`` or ``"better_than_previous(<metric>[, tolerance=<number>])"``: the
  model must be at least as good as the previous model (the best version that passed its gates)
  minus ``tolerance`` (default 0). With no previous version the gate is *skipped*, not failed.

* ``"explanation_available"``: the model's explanation (SHAP or its documented equivalent)
  was computed; a failed explanation fails this gate with the error as the reason.

A metric whose value is missing or undefined makes its gate *fail* (with the reason): an
unmeasured model is not an accepted one. The overall verdict passes when every non-skipped gate
passes.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fstrain.kernel.errors import ConfigError, did_you_mean
from validation.bias import DISPARITY_FIGURES
from validation.fairness import ALL_GROUPS_FIGURES
from validation.metrics import (
    CLASSIFICATION_METRICS,
    GENERATION_METRICS,
    METRIC_DIRECTIONS,
    REGRESSION_METRICS,
)

#: Metric names a gate may reference.
KNOWN_METRICS: tuple[str, ...] = (
    *CLASSIFICATION_METRICS,
    *REGRESSION_METRICS,
    *GENERATION_METRICS,
    "max_abs_dp_difference",
    *DISPARITY_FIGURES,
    *ALL_GROUPS_FIGURES,
)

#: Bias figures, which may carry a ``[column]`` qualifier.
_BIAS_METRICS = frozenset(("max_abs_dp_difference", *DISPARITY_FIGURES, *ALL_GROUPS_FIGURES))

_OPS: dict[str, Any] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_THRESHOLD_RE = re.compile(
    rf"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<column>[^\]]+)\])?\s*"
    rf"(?P<op>>=|<=|>|<|==|=|!=)\s*(?P<value>{_NUMBER})\s*$"
)
_RELATIVE_RE = re.compile(
    r"^\s*(?P<kind>better_than_baseline|better_than_previous)\s*"
    r"(?:\(\s*(?P<args>[^)]*)\))?\s*$"
)
_GRAMMAR = (
    "'<metric> <op> <number>' (op: >=, <=, >, <), 'better_than_baseline[(<metric>)]', "
    "'better_than_previous[(<metric>[, tolerance=<number>])]' or 'explanation_available'"
)
EXPLANATION_GATE = "explanation_available"


@dataclass(frozen=True)
class Gate:
    """A parsed gate. ``kind`` is ``"threshold"``, ``"baseline"`` or ``"previous"``."""

    name: str
    kind: str
    metric: str | None
    op: str | None = None
    threshold: float | None = None
    tolerance: float = 0.0

    @property
    def key(self) -> str | None:
        """The metric name as looked up in the metrics mapping."""
        return self.metric


@dataclass(frozen=True)
class GateResult:
    """Outcome of one gate. ``passed`` is ``None`` for a skipped gate."""

    name: str
    passed: bool | None
    value: float | None
    threshold: float | None
    op: str | None
    detail: str

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"`` or ``"skipped"``."""
        return "skipped" if self.passed is None else ("passed" if self.passed else "failed")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (with ``status``)."""
        return {**asdict(self), "status": self.status}


@dataclass(frozen=True)
class GateReport:
    """All gate results and the overall verdict."""

    results: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        """True when every non-skipped gate passed (vacuously true without gates)."""
        return all(r.passed for r in self.results if r.passed is not None)

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"``, or ``"no gates"`` when nothing was evaluated."""
        if not any(r.passed is not None for r in self.results):
            return "no gates"
        return "passed" if self.passed else "failed"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            "passed": self.passed,
            "status": self.status,
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateReport:
        """Rebuild from :meth:`to_dict` output."""
        fields = ("name", "passed", "value", "threshold", "op", "detail")
        return cls(tuple(GateResult(**{k: r[k] for k in fields}) for r in data["results"]))


def _unknown_metric(spec: str, metric: str) -> ConfigError:
    return ConfigError(
        f"Gate {spec!r}: unknown metric {metric!r}.{did_you_mean(metric, KNOWN_METRICS)} "
        f"Known metrics: {', '.join(KNOWN_METRICS)}."
    )


def _check_metric(spec: str, metric: str) -> None:
    if metric not in KNOWN_METRICS:
        raise _unknown_metric(spec, metric)


def parse_gate(spec: str) -> Gate:
    """Parse one gate string strictly; raise :class:`ConfigError` naming the gate on any error."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"A gate must be a non-empty string like {_GRAMMAR}. Got {spec!r}.")
    if spec.strip() == EXPLANATION_GATE:
        return Gate(EXPLANATION_GATE, "explanation", None)
    m = _RELATIVE_RE.match(spec)
    if m:
        kind = "baseline" if m["kind"] == "better_than_baseline" else "previous"
        metric: str | None = None
        tolerance = 0.0
        args = [a.strip() for a in (m["args"] or "").split(",") if a.strip()]
        for arg in args:
            if "=" in arg:
                key, _, val = (p.strip() for p in arg.partition("="))
                if key != "tolerance" or kind != "previous":
                    raise ConfigError(
                        f"Gate {spec!r}: unknown argument {key!r}. Expected {_GRAMMAR}."
                    )
                try:
                    tolerance = float(val)
                except ValueError:
                    raise ConfigError(
                        f"Gate {spec!r}: tolerance must be a number. Got {val!r} instead."
                    ) from None
                if not math.isfinite(tolerance) or tolerance < 0:
                    raise ConfigError(f"Gate {spec!r}: tolerance must be >= 0. Got {val!r}.")
            elif metric is None:
                metric = arg
                _check_metric(spec, metric)
                if metric not in METRIC_DIRECTIONS:
                    raise ConfigError(
                        f"Gate {spec!r}: {metric!r} has no better/worse direction to compare "
                        f"with; use one of {', '.join(METRIC_DIRECTIONS)}."
                    )
            else:
                raise ConfigError(f"Gate {spec!r}: too many arguments. Expected {_GRAMMAR}.")
        return Gate(spec.strip(), kind, metric, tolerance=tolerance)
    m = _THRESHOLD_RE.match(spec)
    if not m:
        word = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", spec)
        if word and not re.search(r"[<>=]", spec) and word[1] not in KNOWN_METRICS:
            hint = did_you_mean(word[1], [*KNOWN_METRICS, "better_than_baseline",
                                          "better_than_previous", EXPLANATION_GATE])
            raise ConfigError(f"Gate {spec!r} is not understood.{hint} Expected {_GRAMMAR}.")
        raise ConfigError(f"Gate {spec!r} is not understood. Expected {_GRAMMAR}.")
    metric = m["metric"]
    _check_metric(spec, metric)
    if m["op"] not in _OPS:
        raise ConfigError(
            f"Gate {spec!r}: operator {m['op']!r} is not allowed; use one of >=, <=, >, <."
        )
    if m["column"] is not None:
        if metric not in _BIAS_METRICS:
            raise ConfigError(
                f"Gate {spec!r}: only bias figures ({', '.join(sorted(_BIAS_METRICS))}) take a "
                f"[column] qualifier; {metric!r} does not."
            )
        metric = f"{metric}[{m['column'].strip()}]"
    return Gate(spec.strip(), "threshold", metric, m["op"], float(m["value"]))


def parse_gates(specs: Iterable[str]) -> list[Gate]:
    """Parse a list of gate strings (duplicates are rejected)."""
    if isinstance(specs, str):
        raise ConfigError(f"Gates must be a list of strings. Got a single string {specs!r}.")
    gates = [parse_gate(s) for s in specs]
    seen: set[str] = set()
    for g in gates:
        if g.name in seen:
            raise ConfigError(f"Gate {g.name!r} is listed twice.")
        seen.add(g.name)
    return gates


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _lookup(metrics: Mapping[str, Any], key: str) -> Any:
    if key.startswith("max_abs_dp_difference") and key not in metrics:
        alt = key.replace("max_abs_dp_difference", "demographic_parity_difference", 1)
        return metrics.get(alt)
    return metrics.get(key)


def _reason(metrics: Mapping[str, Any], key: str) -> str:
    undefined = metrics.get("undefined") or {}
    if key in undefined:
        return f"{key} is undefined: {undefined[key]}"
    return f"{key} was not computed for this model"


def _explanation_result(g: Gate, metrics: Mapping[str, Any]) -> GateResult:
    error = metrics.get("explanation_error")
    if error is None and metrics.get("explanation_method"):
        return GateResult(g.name, True, None, None, None,
                          f"explained with {metrics['explanation_method']}")
    reason = error or "no explanation was computed"
    return GateResult(g.name, False, None, None, None, f"failed: explanation failed: {reason}")


def failing_gates(report: Mapping[str, Any] | None) -> list[str]:
    """One line per failing gate of a :meth:`GateReport.to_dict`: its name, value and
    threshold (or the reason when no value was measured)."""
    out = []
    for r in (report or {}).get("results", []):
        if r.get("passed") is not False:
            continue
        if r.get("value") is not None and r.get("threshold") is not None and r.get("op"):
            out.append(f"{r['name']} (value {r['value']:.4g}, required {r['op']} "
                       f"{r['threshold']:.4g})")
        else:
            out.append(f"{r['name']} ({r['detail']})")
    return out


def evaluate_gates(
    gates: Sequence[str | Gate],
    metrics: Mapping[str, Any],
    *,
    baseline: Mapping[str, Any] | None = None,
    previous: Mapping[str, Any] | None = None,
    previous_label: str = "previous version",
    primary_metric: str = "roc_auc",
) -> GateReport:
    """Evaluate gates against flat metric values.

    Args:
        gates: gate strings or parsed :class:`Gate` objects.
        metrics: metric name → value for this model (classification/regression metrics plus
            bias figures, e.g. from ``BiasReport.figures()``); an ``"undefined"`` entry
            (metric → reason) explains missing values.
        baseline: the baseline's metrics (for ``better_than_baseline``).
        previous: the previous best passed version's metrics, or ``None`` when there is none.
        previous_label: how to name the previous version in details (e.g. ``"version 3"``).
        primary_metric: the metric ``better_than_*`` gates compare when none is given.

    Returns:
        A :class:`GateReport`.
    """
    parsed = [g if isinstance(g, Gate) else parse_gate(g) for g in gates]
    results: list[GateResult] = []
    for g in parsed:
        if g.kind == "explanation":
            results.append(_explanation_result(g, metrics))
        elif g.kind == "threshold":
            results.append(_threshold_result(g, metrics))
        else:
            ref_map = baseline if g.kind == "baseline" else previous
            who = "the baseline" if g.kind == "baseline" else previous_label
            results.append(_comparison_result(g, metrics, ref_map, who, primary_metric))
    return GateReport(tuple(results))


def _threshold_result(g: Gate, metrics: Mapping[str, Any]) -> GateResult:
    """``metric op threshold``."""
    assert g.metric is not None and g.op is not None and g.threshold is not None
    value = _number(_lookup(metrics, g.metric))
    if value is None:
        return GateResult(g.name, False, None, g.threshold, g.op,
                          f"failed: {_reason(metrics, g.metric)}")
    ok = bool(_OPS[g.op](value, g.threshold))
    return GateResult(
        g.name, ok, value, g.threshold, g.op,
        f"{g.metric} = {value:.4g} {'satisfies' if ok else 'violates'} "
        f"{g.op} {g.threshold:g}",
    )


def _comparison_result(g: Gate, metrics: Mapping[str, Any], ref_map: Mapping[str, Any] | None,
                       who: str, primary_metric: str) -> GateResult:
    """``better_than_baseline`` / ``no_worse_than_previous``: this model against ``ref_map``
    (the baseline's or the previous version's metrics), named ``who`` in the detail."""
    metric = g.metric or primary_metric
    if metric not in METRIC_DIRECTIONS:
        raise ConfigError(
            f"Gate {g.name!r}: primary metric {metric!r} has no direction; use one of "
            f"{', '.join(METRIC_DIRECTIONS)}."
        )
    higher = METRIC_DIRECTIONS[metric]
    value = _number(metrics.get(metric))
    if ref_map is None:
        if g.kind == "previous":
            return GateResult(
                g.name, None, value, None, None,
                "skipped: no previous version has passed its gates, nothing to compare with",
            )
        return GateResult(g.name, False, value, None, None,
                          "failed: no baseline metrics were computed")
    ref = _number(ref_map.get(metric))
    if value is None or ref is None:
        missing = "this model" if value is None else who
        reason = _reason(metrics if value is None else ref_map, metric)
        return GateResult(g.name, False, value, ref, None,
                          f"failed: {metric} missing for {missing} ({reason})")
    better = "higher" if higher else "lower"
    if g.kind == "baseline":
        ok = value > ref if higher else value < ref
        return GateResult(g.name, ok, value, ref, ">" if higher else "<",
                          f"{metric} = {value:.4g} vs baseline {ref:.4g} "
                          f"({'better' if ok else 'not better'}; {better} is better)")
    limit = ref - g.tolerance if higher else ref + g.tolerance
    ok = value >= limit if higher else value <= limit
    tol = f" with tolerance {g.tolerance:g}" if g.tolerance else ""
    return GateResult(g.name, ok, value, limit, ">=" if higher else "<=",
                      f"{metric} = {value:.4g} vs {who} {ref:.4g}{tol} "
                      f"({'no worse' if ok else 'worse'}; {better} is better)")


#: What a validation of each task computes that a gate may reference (bias figures: binary).
_TASK_METRICS: dict[str, tuple[str, ...]] = {
    "binary": CLASSIFICATION_METRICS,
    "multiclass": ("accuracy", "log_loss"),
    "regression": REGRESSION_METRICS,
    "generation": GENERATION_METRICS,
}


def check_computable(gates: Sequence[Gate], *, task: str | None, slices: Sequence[str],
                     where: str) -> None:
    """Refuse, before any validation work, a gate on something the run will not compute: a
    metric of another task (``rmse`` on a classifier), or a bias figure on a column that is no
    slice of the run (``disparate_impact_ratio[gender]`` where the slices are ``sex``,
    ``race``). ``task`` is ``binary``, ``multiclass``, ``regression`` or ``generation`` (None:
    not known before the model loads, so only columns are checked); ``slices`` are the helper
    columns (and ``a×b`` intersections) the bias tests slice by; ``where`` names the model and
    feature view in the message.

    Raises:
        ConfigError: naming the gate, the metric or column, and what the run computes.
    """
    task = task if task in _TASK_METRICS else None
    for g in gates:
        if g.metric is None:
            continue
        metric, _, column = g.metric.partition("[")
        column = column.removesuffix("]")
        if task is not None and metric in _BIAS_METRICS and task != "binary":
            raise ConfigError(f"Gate {g.name!r}: {where} is a {task} model, whose validation "
                              "computes no bias figures (they are computed for binary "
                              "classifiers over helper-column slices).")
        if task is not None and metric not in _BIAS_METRICS and metric not in _TASK_METRICS[task]:
            known = _TASK_METRICS[task]
            raise ConfigError(
                f"Gate {g.name!r}: {where} is a {task} model, whose validation does not compute "
                f"{metric!r}.{did_you_mean(metric, known)} It computes: {', '.join(known)}.")
        if column and column not in slices:
            listed = ", ".join(slices) or "none: its feature view has no training helper columns"
            raise ConfigError(
                f"Gate {g.name!r}: {column!r} is not a slice column of {where}."
                f"{did_you_mean(column, slices)} Slice columns: {listed}.")
